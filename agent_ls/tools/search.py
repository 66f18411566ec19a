"""``list_files`` and ``grep_search``: ripgrep over the workspace, with open buffers winning.

Both tools run the ``rg`` binary of the PyPI ``ripgrep`` wheel as an asyncio subprocess, so a
search never blocks the event loop and is killed (then reaped) on cancellation or timeout.
``.gitignore`` is honoured in and outside git repositories, hidden files are searched and
``.git/`` is not.

The editor's view wins: an open buffer whose text differs from the disk copy is searched in
its text (the disk copy's matches are dropped), and an unsaved new buffer is listed and
searched as if it were on disk. A buffer is only searched when rg would have searched its file.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import sysconfig
import tempfile
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from agent_ls.ports.editor import Buffer
from agent_ls.ports.updates import Location, ToolKind
from agent_ls.tools.base import RESULT_CHAR_CAP, Tool, ToolContext, ToolResult, cap_text
from agent_ls.workspace import FileProblem, Workspace

DEFAULT_TIMEOUT = 30.0
MAX_LISTED_FILES = 1000
LIST_COLLECT_LIMIT = 50_000  # beyond this rg is stopped and the total is "more than"
MAX_SHOWN_MATCHES = 200
MATCH_STORE_LIMIT = 2_000  # matches kept (parsed) for sorting; later ones are only counted
MATCH_COUNT_LIMIT = 5_000  # beyond this rg is stopped and the total is "more than"
MAX_LINE_CHARS = 300
MAX_FILESIZE = "10M"
MAX_RECORD_BYTES = 32 << 20  # an rg output record longer than this is dropped
READ_CHUNK = 1 << 16
PUMP_EXIT_SECONDS = 5.0  # how long to wait for the reader thread once rg is killed

COMMON_ARGS = (
    "--no-config",  # a user's RIPGREP_CONFIG_PATH must not change what the model sees
    "--no-require-git",
    "--hidden",
    "--glob",
    "!.git",
)
SEARCH_ARGS = ("--json", *COMMON_ARGS, "--max-filesize", MAX_FILESIZE)
UTF8_BOM = b"\xef\xbb\xbf"
SPECIAL_DIRS = (".", "..", ".git")
NO_RG = "ripgrep (rg) is not installed; search is unavailable"


class SearchError(Exception):
    """A search cannot run; the message is written for the model."""


@cache
def rg_binary() -> str | None:
    """The ``rg`` of the ``ripgrep`` wheel next to this Python, else the one on PATH."""
    candidate = os.path.join(sysconfig.get_path("scripts"), "rg")
    if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
        return candidate
    return shutil.which("rg")


# --------------------------------------------------------------------------- running rg


@dataclass(slots=True)
class RgRun:
    returncode: int | None
    stderr: str
    stopped: bool = False  # the consumer had enough and rg was killed
    timed_out: bool = False
    records: int = 0  # output records seen (rg --json always ends with a summary record)
    dropped_records: int = 0

    @property
    def fatal(self) -> bool:
        """rg gave up before searching (a bad regex or glob): exit 2 and no output."""
        return self.returncode == 2 and self.records == 0 and not self.timed_out


async def run_rg(
    args: list[str],
    cwd: Path,
    on_record: Callable[[bytes], bool],
    *,
    time_limit: float,
    separator: bytes = b"\n",
    stdin_data: bytes | None = None,
) -> RgRun:
    """Run rg, feeding each output record to ``on_record`` (which returns False to stop it).

    rg is killed and reaped when the consumer stops, on timeout and on cancellation.
    """
    binary = rg_binary()
    if binary is None:
        raise SearchError(NO_RG)
    # rg's output is read and parsed in a worker thread: a search printing megabytes of JSON
    # must not hold the event loop (agent.status and agent.cancel stay answered).
    read_fd, write_fd = os.pipe()
    try:
        proc = await asyncio.create_subprocess_exec(
            binary,
            *args,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL if stdin_data is None else asyncio.subprocess.PIPE,
            stdout=write_fd,
            stderr=asyncio.subprocess.PIPE,
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)  # rg holds the write end; EOF comes when it exits
    output = os.fdopen(read_fd, "rb", buffering=0)
    assert proc.stderr is not None
    stderr_task = asyncio.create_task(_read_capped(proc.stderr, 16_384))
    writer = None
    if stdin_data is not None:
        writer = asyncio.create_task(_feed(proc, stdin_data))
    run = RgRun(returncode=None, stderr="")
    stop = threading.Event()
    pump = asyncio.ensure_future(
        asyncio.to_thread(_pump, output.read, separator, on_record, run, stop)
    )
    finished = False
    try:
        try:
            async with asyncio.timeout(time_limit):
                finished = await asyncio.shield(pump)
        except TimeoutError:
            run.timed_out = True
        run.stopped = not finished and not run.timed_out
    finally:
        stop.set()
        if not finished and proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        if writer is not None:
            writer.cancel()
            await asyncio.wait([writer])
        if proc.stdin is not None:
            proc.stdin.close()
        await asyncio.wait([pump], timeout=PUMP_EXIT_SECONDS)  # EOF once rg is gone
        if pump.done():
            output.close()
            if not pump.cancelled():
                pump.exception()  # retrieved: a consumer's error is not re-raised here
        await proc.wait()
        run.stderr = (await stderr_task).decode("utf-8", "replace")
    run.returncode = proc.returncode
    return run


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> bytes:
    kept = bytearray()
    while chunk := await stream.read(READ_CHUNK):
        if len(kept) < cap:
            kept.extend(chunk[: cap - len(kept)])
    return bytes(kept)


def _pump(
    read: Callable[[int], bytes],
    separator: bytes,
    on_record: Callable[[bytes], bool],
    run: RgRun,
    stop: threading.Event,
) -> bool:
    """Split rg's output into records (in a worker thread); True at EOF, False when
    ``on_record`` asked to stop or the search was stopped."""
    pending = bytearray()
    skipping = False  # inside a record that outgrew MAX_RECORD_BYTES

    def emit(record: bytes) -> bool:
        run.records += 1
        return on_record(record)

    while not stop.is_set():
        try:
            chunk = read(READ_CHUNK)
        except (OSError, ValueError):  # the pipe was closed under us
            return False
        if not chunk:
            if pending and not skipping:
                return emit(bytes(pending))
            return True
        cut = chunk.find(separator)
        if cut < 0:
            if not skipping:
                pending.extend(chunk)
                if len(pending) > MAX_RECORD_BYTES:
                    pending.clear()
                    skipping = True
                    run.dropped_records += 1
            continue
        parts = chunk[cut + 1 :].split(separator)
        if skipping:
            skipping = False
        else:
            pending.extend(chunk[:cut])
            if not emit(bytes(pending)):
                return False
        for part in parts[:-1]:
            if not emit(part):
                return False
        pending = bytearray(parts[-1])
    return False


# --------------------------------------------------------------------------- paths and globs


def resolve_targets(raw: str | None, workspace: Workspace) -> list[Path]:
    """The paths to search: the given one, or every workspace folder."""
    if raw is None or not raw.strip():
        return list(workspace.roots)
    try:
        path = workspace.resolve(raw)
    except FileProblem as exc:
        raise SearchError(str(exc)) from None
    if not workspace.contains(path):
        raise SearchError(f"{raw}: path is outside the workspace")
    if not path.exists() and workspace.buffer(path) is None:
        raise SearchError(f"{raw}: no such file or directory")
    return [path]


@dataclass(slots=True)
class FileFilter:
    """Which files under ``target`` a glob selects, and how rg can narrow its walk.

    rg's ``--glob`` overrides ``.gitignore`` (``-g '*'`` lists ignored files too), so the glob
    is never given to rg as such. rg walks ``walk`` (the glob's literal directory prefix)
    honouring the ignore files, prefiltered by file name through a file type when the glob's
    last segment allows it, and ``regex`` decides on the path relative to ``target``.
    """

    target: Path
    walk: Path
    rg_args: list[str]
    regex: re.Pattern[str] | None
    # Paths are compared as strings: rg prints them under ``walk`` as given, and pathlib
    # costs more than rg itself on large listings.
    _target: str = field(init=False, default="")
    _prefix: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self._target = str(self.target)
        self._prefix = self._target.rstrip("/") + "/"

    def contains(self, path: str) -> bool:
        return path == self._target or path.startswith(self._prefix)

    def accepts(self, path: str) -> bool:
        """Whether the glob selects ``path`` (an absolute path string under the target)."""
        if self.regex is None or path == self._target:
            return True
        if not path.startswith(self._prefix):
            return False
        return self.regex.match(path[len(self._prefix) :]) is not None


def plan_filter(glob: str | None, target: Path) -> FileFilter:
    if not glob or not target.is_dir():
        return FileFilter(target, target, [], None)
    negate, body = (True, glob[1:]) if glob.startswith("!") else (False, glob)
    base = target.as_posix().rstrip("/") + "/"
    if body.startswith(base):  # an absolute glob inside the target
        body = body[len(base) :]
    body = body.removeprefix("./")
    if body.endswith("/"):  # a directory: everything in it
        body += "**"
    regex = glob_to_regex(("!" if negate else "") + body)
    if re.search(r"\{[^}]*/", body):  # an alternative holds a '/': no shortcuts
        return FileFilter(target, target, [], regex)
    segments = body.strip("/").split("/")
    rg_args: list[str] = []
    name = segments[-1]
    # A file type matches file names anywhere: exact for "*.py", a prefilter for "src/*.py",
    # and wrong for a negated glob with a directory part ("!src/*.md" is not "no *.md").
    if name and "**" not in name and ":" not in name and not (negate and len(segments) > 1):
        rg_args = ["--type-add", f"agentls:{name}", "--type-not" if negate else "--type"]
        rg_args.append("agentls")
    walk = target
    if not negate:
        for segment in segments[:-1]:
            if not segment or any(c in segment for c in "*?[{\\") or segment in SPECIAL_DIRS:
                break
            walk = walk / segment
        if not walk.is_dir():
            walk = target
    return FileFilter(target, walk, rg_args, regex)


def glob_to_regex(pattern: str) -> re.Pattern[str] | None:
    """A glob as a regex over '/'-separated paths relative to the searched directory.

    Like rg's globs: ``*`` and ``?`` stay within a segment, ``**`` crosses them, ``{a,b}``
    alternates, a leading ``!`` negates and a glob without ``/`` matches file names at any
    depth. None for an empty glob.
    """
    negate = pattern.startswith("!")
    body = (pattern[1:] if negate else pattern).rstrip("/")
    if not body:
        return None
    if "/" not in body:
        body = "**/" + body
    regex = _translate_glob(body.lstrip("/"))
    if negate:
        return re.compile(f"(?!(?s:{regex})\\Z)")
    return re.compile(f"(?s:{regex})\\Z")


def _translate_glob(glob: str) -> str:
    out: list[str] = []
    i, n = 0, len(glob)
    while i < n:
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "\\" and i + 1 < n:
            out.append(re.escape(glob[i + 1]))
            i += 2
        elif c == "[" and (end := glob.find("]", i + 2)) > 0:
            inner = glob[i + 1 : end].replace("\\", "\\\\")
            out.append("[" + ("^" + inner[1:] if inner.startswith("!") else inner) + "]")
            i = end + 1
        elif c == "{" and (end := glob.find("}", i)) > 0:
            options = glob[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_translate_glob(o) for o in options) + ")")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


async def collect_files(
    filters: list[FileFilter],
    *,
    time_limit: float,
    limit: int = LIST_COLLECT_LIMIT,
    only: set[str] | None = None,
) -> tuple[list[str], list[RgRun], bool]:
    """The files rg finds for ``filters`` (at most ``limit``); True when there were more.

    With ``only``, just those paths are kept (to learn which of them rg would search).
    """
    found: list[str] = []
    more = False
    runs = []
    for file_filter in filters:
        if not file_filter.walk.exists():
            continue

        def collect(record: bytes, accepts: Callable[[str], bool] = file_filter.accepts) -> bool:
            nonlocal more
            if not record:
                return True
            path = os.fsdecode(record)
            if (only is not None and path not in only) or not accepts(path):
                return True
            if len(found) >= limit:
                more = True
                return False
            found.append(path)
            return True

        args = [
            "--files",
            "--null",
            *COMMON_ARGS,
            *file_filter.rg_args,
            "--",
            str(file_filter.walk),
        ]
        runs.append(
            await run_rg(
                args, _cwd(file_filter.target), collect, time_limit=time_limit, separator=b"\0"
            )
        )
    return found, runs, more


def _cwd(target: Path) -> Path:
    return target if target.is_dir() else target.parent


def open_buffers(workspace: Workspace) -> list[Buffer]:
    """The editor's open buffers, when the workspace can enumerate them."""
    lister = getattr(workspace, "open_buffers", None)
    if not callable(lister):
        return []
    return list(lister())


def _buffers_in(workspace: Workspace, filters: list[FileFilter]) -> list[tuple[Buffer, FileFilter]]:
    """Open buffers under one of the searched targets (not inside ``.git``)."""
    found = []
    for buffer in open_buffers(workspace):
        path = buffer.path.resolve()
        for file_filter in filters:
            target = file_filter.target
            if path == target or (
                path.is_relative_to(target) and ".git" not in path.relative_to(target).parts
            ):
                found.append((Buffer(path, buffer.text, buffer.version), file_filter))
                break
    return found


def _disk_states(buffers: list[Buffer]) -> list[str]:
    """For each buffer: "new" (not on disk), "same" (disk holds its text) or "dirty"."""
    states = []
    for buffer in buffers:
        try:
            disk = buffer.path.read_bytes().removeprefix(UTF8_BOM)  # editors hide the BOM
            same = disk == buffer.text.encode("utf-8", "surrogatepass")
        except FileNotFoundError:
            states.append("new")
            continue
        except OSError:
            same = False
        states.append("same" if same else "dirty")
    return states


def _locations(raw: str | None, workspace: Workspace) -> list[Location]:
    try:
        path = workspace.resolve(raw) if raw else workspace.root
    except FileProblem:
        return []
    return [{"path": str(path)}]


def _displayer(workspace: Workspace) -> Callable[[str], str]:
    """``workspace.display`` for path strings, by prefix when the path is under a root."""
    prefixes = [str(root).rstrip("/") + "/" for root in workspace.roots]

    def display(path: str) -> str:
        for prefix in prefixes:
            if path.startswith(prefix):
                return _printable(path[len(prefix) :])
        return _printable(workspace.display(Path(path)))

    return display


def _printable(text: str) -> str:
    """Text safe to send as UTF-8 (file names may carry surrogate escapes)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _clean_rg_error(stderr: str, pattern: str | None = None) -> str:
    """rg's error message without its prefixes and its ``(?:...)`` wrapping of the regex."""
    lines = [line.removeprefix("rg: ") for line in stderr.strip().splitlines()]
    text = "\n".join(lines)
    if 'literal "\\n" is not allowed' in text:
        return "the pattern contains a line break; grep_search matches one line at a time"
    if pattern is not None and "regex parse error" in text:
        if (len(pattern) - len(pattern.rstrip("\\"))) % 2:
            return f"invalid regex {pattern!r}: it ends with a lone backslash"
        # rg shows the regex as "(?:PATTERN)" with carets under it: show the model's pattern.
        wrapped = f"(?:{pattern})"
        out: list[str] = []
        column: int | None = None
        for line in lines:
            stripped = line.strip()
            indent = len(line) - len(line.lstrip(" "))
            if stripped == wrapped:
                out.append(" " * indent + pattern)
                column = indent
            elif column is not None and stripped and set(stripped) <= {"^"}:
                if indent >= column + 3:  # carets under the wrapper itself would mislead
                    out.append(line[3:])
            elif line == "regex parse error:":
                out.append(f"invalid regex {pattern!r}:")
            else:
                out.append(line)
        text = "\n".join(out)
    return text or "ripgrep failed"


# --------------------------------------------------------------------------- list_files


class ListFilesInput(BaseModel):
    pattern: str = Field(
        min_length=1,
        description=(
            "Glob matched against file paths relative to `path`, e.g. `**/*.py`, `*.md`, "
            "`src/**`, `tests/test_*.py`, `*.{ts,tsx}`. A pattern without `/` matches file "
            "names at any depth."
        ),
    )
    path: str | None = Field(
        default=None,
        description=(
            "Directory to list, relative to the workspace root or absolute. "
            "Defaults to the whole workspace."
        ),
    )


class ListFiles(Tool[ListFilesInput]):
    name: ClassVar[str] = "list_files"
    input_model: ClassVar[type[BaseModel]] = ListFilesInput
    kind: ClassVar[ToolKind] = "search"
    read_only: ClassVar[bool] = True
    concurrency_safe: ClassVar[bool] = True

    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout

    def title(self, args: ListFilesInput) -> str:
        return f"list {args.pattern}" + (f" in {args.path}" if args.path else "")

    def locations(self, args: ListFilesInput, ctx: ToolContext) -> list[Location]:
        return _locations(args.path, ctx.workspace)

    async def run(self, args: ListFilesInput, ctx: ToolContext) -> ToolResult:
        try:
            targets = resolve_targets(args.path, ctx.workspace)
        except SearchError as exc:
            return ToolResult(str(exc), is_error=True)
        if rg_binary() is None:
            return ToolResult(NO_RG, is_error=True)
        filters = [plan_filter(args.pattern, t) for t in targets]
        try:
            found, runs, more = await collect_files(filters, time_limit=self.timeout)
        except OSError as exc:
            return ToolResult(f"list_files could not run rg: {exc}", is_error=True)
        fatal = [r for r in runs if r.fatal]
        if fatal:
            message = f"list_files failed: {_clean_rg_error(fatal[0].stderr)}"
            return ToolResult(message, is_error=True)

        # Files that exist only in the editor (new, unsaved) are listed when the glob matches.
        for buffer, file_filter in _buffers_in(ctx.workspace, filters):
            if file_filter.accepts(str(buffer.path)) and not buffer.path.exists():
                found.append(str(buffer.path))

        timed_out = any(r.timed_out for r in runs)
        if not found:
            if timed_out:
                message = f"list_files timed out after {self.timeout:g} s; narrow the path"
                return ToolResult(message, is_error=True)
            return ToolResult(f"No files match {args.pattern}", raw_output={"count": 0})

        ordered = await asyncio.to_thread(_newest_first, found)
        shown = ordered[:MAX_LISTED_FILES]
        display = _displayer(ctx.workspace)
        lines = [display(p) for p in shown]
        omitted = len(ordered) - len(lines)
        if more:
            lines.append(f"(more than {omitted:,} more files not shown; narrow the pattern)")
        elif omitted:
            lines.append(f"({omitted:,} more files not shown; narrow the pattern)")
        if timed_out:
            lines.append(f"(listing stopped after {self.timeout:g} s; results are incomplete)")
        return ToolResult(cap_text("\n".join(lines)), raw_output={"count": len(ordered)})


def _newest_first(paths: list[str]) -> list[str]:
    def mtime(path: str) -> float:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return 0.0

    return sorted(sorted(set(paths)), key=mtime, reverse=True)


# --------------------------------------------------------------------------- grep_search


class GrepSearchInput(BaseModel):
    pattern: str = Field(
        min_length=1,
        description=(
            "Regular expression (ripgrep / Rust regex syntax) matched line by line, e.g. "
            "`def \\w+_handler`, `TODO|FIXME`, `import (os|sys)`. Case-sensitive; start with "
            "`(?i)` to ignore case. Escape literal `(`, `.`, `[`, `{` with a backslash."
        ),
    )
    path: str | None = Field(
        default=None,
        description=(
            "File or directory to search, relative to the workspace root or absolute. "
            "Defaults to the whole workspace."
        ),
    )
    include: str | None = Field(
        default=None,
        description=(
            "Glob limiting the files searched, relative to `path`, e.g. `*.py`, "
            "`*.{ts,tsx}`, `src/**/*.rs`."
        ),
    )


@dataclass(slots=True)
class Match:
    path: str
    line: int
    text: str  # the line as shown: without its terminator, clipped around the match

    @classmethod
    def of(cls, path: str, line: int, text: str, start: int) -> Match:
        """A match on ``text`` whose first hit starts at character ``start``."""
        return cls(path, line, _clip(text, start))


@dataclass
class _MatchCollector:
    """Keeps the first matches rg prints and counts the rest, skipping rejected files."""

    accepts: Callable[[str], bool]
    matches: list[Match] = field(default_factory=list)
    files: set[str] = field(default_factory=set)
    total: int = 0
    more: bool = False
    _current: str = ""
    _skip: bool = False

    def __call__(self, record: bytes) -> bool:
        if record.startswith(b'{"type":"begin"'):
            self._current = _rg_path(json.loads(record)["data"]["path"])
            self._skip = not self.accepts(self._current)
        elif record.startswith(b'{"type":"match"') and not self._skip:
            if self.total >= MATCH_COUNT_LIMIT:
                self.more = True
                return False
            if len(self.matches) < MATCH_STORE_LIMIT:
                self.matches.append(_match_from_rg(self._current, json.loads(record)["data"]))
            self.files.add(self._current)
            self.total += 1
        return True

    def add(self, found: list[Match]) -> None:
        self.files.update(m.path for m in found)
        self.total += len(found)
        self.matches.extend(found)


def _rg_text(obj: dict[str, Any]) -> str:
    if "text" in obj:
        return str(obj["text"])
    return base64.b64decode(obj.get("bytes", "")).decode("utf-8", "replace")


def _rg_path(obj: dict[str, Any]) -> str:
    if "text" in obj:
        return str(obj["text"])
    return os.fsdecode(base64.b64decode(obj.get("bytes", "")))


def _match_from_rg(path: str, data: dict[str, Any]) -> Match:
    lines = data["lines"]
    text = _rg_text(lines)
    start = 0
    if submatches := data.get("submatches"):
        offset = int(submatches[0].get("start", 0))  # a byte offset
        raw = text.encode("utf-8") if "text" in lines else base64.b64decode(lines["bytes"])
        start = len(raw[:offset].decode("utf-8", "replace"))
    return Match.of(path, int(data.get("line_number") or 0), text, start)


class GrepSearch(Tool[GrepSearchInput]):
    name: ClassVar[str] = "grep_search"
    input_model: ClassVar[type[BaseModel]] = GrepSearchInput
    kind: ClassVar[ToolKind] = "search"
    read_only: ClassVar[bool] = True
    concurrency_safe: ClassVar[bool] = True

    def __init__(self, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.timeout = timeout

    def title(self, args: GrepSearchInput) -> str:
        where = f" in {args.path}" if args.path else ""
        include = f" ({args.include})" if args.include else ""
        return f"grep {args.pattern!r}{where}{include}"

    def locations(self, args: GrepSearchInput, ctx: ToolContext) -> list[Location]:
        return _locations(args.path, ctx.workspace)

    async def run(self, args: GrepSearchInput, ctx: ToolContext) -> ToolResult:
        try:
            targets = resolve_targets(args.path, ctx.workspace)
        except SearchError as exc:
            return ToolResult(str(exc), is_error=True)
        if rg_binary() is None:
            return ToolResult(NO_RG, is_error=True)
        filters = [plan_filter(args.include, t) for t in targets]

        # Open buffers whose text is not what the disk holds are searched in their text, and
        # rg's matches for their disk copies are dropped.
        scoped = _buffers_in(ctx.workspace, filters)
        states = await asyncio.to_thread(_disk_states, [b for b, _ in scoped])
        dirty = [(b, f) for s, (b, f) in zip(states, scoped, strict=True) if s == "dirty"]
        new = [(b, f) for s, (b, f) in zip(states, scoped, strict=True) if s == "new"]
        dirty_paths = {str(b.path) for b, _ in dirty}

        def accepts(path: str) -> bool:
            if path in dirty_paths:
                return False
            return any(f.accepts(path) for f in filters if f.contains(path))

        collector = _MatchCollector(accepts)
        try:
            async with asyncio.TaskGroup() as group:
                searches = [
                    group.create_task(self._rg_search(args.pattern, f, collector))
                    for f in filters
                    if f.walk.exists()
                ]
                # rg decides which dirty buffers it would have searched (ignore files, include)
                listing = None
                dirty_filters = [f for f in filters if any(g is f for _, g in dirty)]
                if any(f.target.is_dir() for f in dirty_filters):
                    listing = group.create_task(
                        collect_files(dirty_filters, time_limit=self.timeout, only=dirty_paths)
                    )
        except ExceptionGroup as errors:  # rg could not be started (no processes, no fds)
            if not all(isinstance(e, OSError) for e in errors.exceptions):
                raise
            message = f"grep_search could not run rg: {errors.exceptions[0]}"
            return ToolResult(message, is_error=True)
        runs = [t.result() for t in searches]
        fatal = [r for r in runs if r.fatal]
        if fatal:
            return ToolResult(_clean_rg_error(fatal[0].stderr, args.pattern), is_error=True)

        listed = set(listing.result()[0]) if listing is not None else set()
        to_search = [b for b, f in dirty if b.path == f.target or str(b.path) in listed]
        to_search += [b for b, f in new if f.accepts(str(b.path))]
        try:
            collector.add(await self._search_buffers(args.pattern, to_search))
        except SearchError as exc:
            return ToolResult(str(exc), is_error=True)

        timed_out = any(r.timed_out for r in runs)
        if collector.total == 0:
            if timed_out:
                return ToolResult(
                    f"grep_search timed out after {self.timeout:g} s with no matches so far; "
                    "narrow the path or the include glob",
                    is_error=True,
                )
            return ToolResult(f"No matches for {args.pattern}", raw_output={"matches": 0})
        text = _format_matches(collector, ctx.workspace)
        if timed_out:
            text += f"\n(search stopped after {self.timeout:g} s; results are incomplete)"
        if dropped := sum(r.dropped_records for r in runs):
            text += f"\n({dropped:,} matches on extremely long lines not shown)"
        return ToolResult(
            cap_text(text), raw_output={"matches": collector.total, "files": len(collector.files)}
        )

    async def _rg_search(
        self, pattern: str, file_filter: FileFilter, collector: _MatchCollector
    ) -> RgRun:
        args = [*SEARCH_ARGS, *file_filter.rg_args, "-e", pattern]
        return await run_rg(
            [*args, "--", str(file_filter.walk)],
            _cwd(file_filter.target),
            collector,
            time_limit=self.timeout,
        )

    async def _search_buffers(self, pattern: str, buffers: list[Buffer]) -> list[Match]:
        if not buffers:
            return []
        regex = _python_regex(pattern)
        if regex is not None:
            return await asyncio.to_thread(_search_texts, regex, buffers)
        # Python's re cannot read this pattern the way rg does: rg searches the texts.
        found: list[Match] = []
        for buffer in buffers:
            collector = _MatchCollector(lambda _p: True)
            run = await run_rg(
                ["--json", "--no-config", "-e", pattern, "-"],
                _cwd(buffer.path) if buffer.path.parent.is_dir() else Path(tempfile.gettempdir()),
                collector,
                time_limit=self.timeout,
                stdin_data=buffer.text.encode("utf-8", "surrogatepass"),
            )
            if run.fatal:
                raise SearchError(_clean_rg_error(run.stderr, pattern))
            found += [Match(str(buffer.path), m.line, m.text) for m in collector.matches]
        return found


@cache
def _python_regex(pattern: str) -> re.Pattern[str] | None:
    """The pattern as a Python regex when Python reads it without complaint, else None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            return re.compile(pattern)
    except (re.error, Warning, RecursionError, OverflowError):
        return None


def _search_texts(regex: re.Pattern[str], buffers: list[Buffer]) -> list[Match]:
    """Line-by-line matches of ``regex`` in the buffers' texts, as rg would report them."""
    found = []
    for buffer in buffers:
        lines = buffer.text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, 1):
            hit = regex.search(line)
            if hit is not None:
                found.append(Match.of(str(buffer.path), number, line, hit.start()))
    return found


def _format_matches(collector: _MatchCollector, workspace: Workspace) -> str:
    display = _displayer(workspace)
    shown: list[str] = []
    budget = RESULT_CHAR_CAP - 500
    for match in sorted(collector.matches, key=lambda m: (m.path, m.line)):
        if len(shown) == MAX_SHOWN_MATCHES:
            break
        line = f"{display(match.path)}:{match.line}: {match.text}"
        budget -= len(line) + 1
        if budget < 0:
            break
        shown.append(line)
    omitted = collector.total - len(shown)
    if omitted:
        more = "more than " if collector.more else ""
        files = len(collector.files)
        shown.append(
            f"\n({more}{omitted:,} more matches not shown, {more}{collector.total:,} in "
            f"{files:,} file{'' if files == 1 else 's'}; "
            "narrow the pattern, path or include glob)"
        )
    return "\n".join(shown)


def _clip(text: str, start: int) -> str:
    """The line without its terminator, cut to MAX_LINE_CHARS around the match."""
    text = text.rstrip("\r\n")
    if len(text) <= MAX_LINE_CHARS:
        return text
    begin = max(0, min(start - MAX_LINE_CHARS // 3, len(text) - MAX_LINE_CHARS))
    prefix = "…" if begin > 0 else ""
    suffix = "…" if begin + MAX_LINE_CHARS < len(text) else ""
    clipped = text[begin : begin + MAX_LINE_CHARS]
    return f"{prefix}{clipped}{suffix} [line of {len(text):,} chars]"
