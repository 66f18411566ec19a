"""``list_files`` and ``grep_search``: ripgrep over the workspace, with open buffers winning.

Both tools run the ``rg`` binary of the PyPI ``ripgrep`` wheel from a worker thread (spawned,
read, parsed and reaped there), so a search never blocks the event loop, and rg is killed
(then reaped) once the answer has enough, on cancellation or timeout.
``.gitignore`` is honoured in and outside git repositories, hidden files are searched and
``.git/`` is not.

The editor's view wins: an open buffer whose text differs from the disk copy is searched in
its text (the disk copy's matches are dropped), and an unsaved new buffer is listed and
searched as if it were on disk. A buffer is only searched when rg would have searched its file.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import heapq
import os
import re
import selectors
import subprocess
import sys
import sysconfig
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from itertools import groupby
from operator import attrgetter
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

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
MAX_RECORD_BYTES = 32 << 20  # a longer line of rg's output is dropped (a buffer on stdin)
READ_CHUNK = 1 << 18
PIPE_BYTES = 1 << 20  # rg's stdout pipe (Linux caps it at /proc/sys/fs/pipe-max-size)
PUMP_EXIT_SECONDS = 5.0  # how long to wait for the reader thread once rg is killed
# After a read that did not fill READ_CHUNK, the reader waits this long: rg's output gathers
# in the pipe instead of waking the reader for every few KiB rg writes, and each wake-up took
# a core from rg (two cores: 5,000-match greps 10-15 % faster).
PUMP_NAP = 0.001
STDERR_CAP = 16_384

COMMON_ARGS = (
    "--no-config",  # a user's RIPGREP_CONFIG_PATH must not change what the model sees
    "--no-require-git",
    "--hidden",
    "--glob",
    "!.git",
)
# What rg prints of a match: the file's path on a line of its own ("heading"), then a line
# per match: its number, its first match's column (1-based, in bytes) and the line, the
# fields joined by FIELD_SEP. A fifth of the bytes of its JSON, written and read faster.
FIELD_SEP = b"\0"  # no path and no searched line holds it (rg stops at a binary file's NUL)
PRINT_ARGS = (
    "--heading",
    "--with-filename",
    "--line-number",
    "--column",
    "--field-match-separator",
    "\\x00",  # rg reads the escape
    "--color",
    "never",
)
SEARCH_ARGS = (*PRINT_ARGS, *COMMON_ARGS, "--max-filesize", MAX_FILESIZE)
BINARY_NOTICE = ": binary file matches ("
FS_ENCODING, FS_ERRORS = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
MAX_HEADER_BYTES = 1 << 16  # a path is at most PATH_MAX; more is not a path
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
    import shutil  # here, not at start-up (~2 ms: bz2, lzma), for a missing wheel only

    return shutil.which("rg")


# --------------------------------------------------------------------------- running rg

# rg's nice value where the idle scheduling class is not available (not Linux). Contended, 10
# cost the agent's own greps 30-50 % on two cores (the thread reading rg's output outranked
# rg); 4 costs a few per cent for most of the responsiveness.
RG_NICENESS = 4


def lower_priority(pid: int) -> None:
    """Run the process ``pid`` (rg) in Linux's idle scheduling class (``SCHED_IDLE``): its
    threads take the cores only when nothing else wants them, and a woken editor or server
    thread gets a core at once. Elsewhere, nice ``RG_NICENESS``.

    At nice 4 a thread of this server woken while rg ran waited for rg's slice to end, up to
    a scheduler tick (4 ms): agent.status took 5 ms at p99 while a grep ran, 4 ms now; rg's
    own speed is the same within the noise (5,000-match greps, two cores). The policy is per
    thread: the main thread first, so threads it starts from now on inherit it, then those
    it started already. Best effort."""
    idle = getattr(os, "SCHED_IDLE", None)
    if idle is not None:
        param = os.sched_param(0)
        try:
            os.sched_setscheduler(pid, idle, param)
            for tid in _other_threads(pid):  # after the main thread: new ones inherit it
                with contextlib.suppress(ProcessLookupError):  # one that ended meanwhile
                    os.sched_setscheduler(tid, idle, param)
            return
        except OSError:  # not allowed here (a seccomp filter): the nice value then
            pass
    if not hasattr(os, "setpriority"):  # Windows
        return
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, pid, RG_NICENESS)
        for tid in _other_threads(pid):
            os.setpriority(os.PRIO_PROCESS, tid, RG_NICENESS)


def _other_threads(pid: int) -> list[int]:
    return [int(tid) for tid in os.listdir(f"/proc/{pid}/task") if int(tid) != pid]


@dataclass(slots=True)
class RgRun:
    returncode: int | None
    stderr: str
    stopped: bool = False  # the consumer had enough and rg was killed
    timed_out: bool = False
    blocks: int = 0  # output blocks seen
    dropped_records: int = 0
    searched: tuple[str, ...] = ()  # the paths rg was given

    @property
    def fatal(self) -> bool:
        """rg gave up before searching (a bad regex or glob): exit 2, no output, and an error
        that is not about a file under a searched path (rg says "rg: PATH: ..." for a file
        it could not read, and goes on)."""
        if self.returncode != 2 or self.blocks or self.timed_out:
            return False
        errors = [line for line in self.stderr.splitlines() if line.strip()]
        about_files = tuple(f"rg: {path}" for path in self.searched)
        return not errors or not all(line.startswith(about_files) for line in errors)


async def run_rg(
    args: list[str],
    cwd: Path,
    on_block: Callable[[bytes], bool],
    *,
    time_limit: float,
    separator: bytes = b"\n",
    stdin_data: bytes | None = None,
    on_output_end: Callable[[], object] | None = None,
) -> RgRun:
    """Run rg, feeding its output to ``on_block`` (which returns False to stop it).

    A block is one or more whole records, each ending with ``separator``: consumers work on
    blocks with C-level ``bytes`` operations rather than a Python call per record. rg is killed
    and reaped when the consumer stops, on timeout and on cancellation.

    ``on_output_end`` runs in the worker thread once the output was read to its end or the
    consumer had enough (rg killed), before rg is reaped: work that needs the whole output
    overlaps rg's exit and saves a trip through the event loop. Not after a timeout or a
    cancellation.
    """
    binary = rg_binary()
    if binary is None:
        raise SearchError(NO_RG)
    # rg is spawned, read, parsed and reaped in one worker thread: the event loop neither
    # forks, nor starts a child-watcher thread, nor reads megabytes of output, so agent.status
    # and agent.cancel stay answered while a search streams.
    searched = tuple(args[args.index("--") + 1 :]) if "--" in args else ()
    run = RgRun(returncode=None, stderr="", searched=searched)
    job = _RgJob([binary, *args], cwd, on_block, separator, stdin_data, run, on_output_end)
    worker = asyncio.get_running_loop().run_in_executor(None, job.run)  # no task around it
    finished = False
    try:
        try:
            async with asyncio.timeout(time_limit):
                finished = await asyncio.shield(worker)
        except TimeoutError:
            run.timed_out = True
        run.stopped = not finished and not run.timed_out
    finally:
        if not finished:
            job.stop()  # kills rg: its output ends, the worker reaps it and returns
        if not worker.done():
            await asyncio.wait([worker], timeout=PUMP_EXIT_SECONDS)
        if worker.done() and not worker.cancelled():
            worker.exception()  # retrieved: a consumer's error is raised by the shield above
    return run


class _RgJob:
    """One rg process, run to its end in a worker thread; ``stop`` may come from any thread."""

    def __init__(
        self,
        argv: list[str],
        cwd: Path,
        on_block: Callable[[bytes], bool],
        separator: bytes,
        stdin_data: bytes | None,
        run: RgRun,
        on_output_end: Callable[[], object] | None = None,
    ) -> None:
        self.argv, self.cwd, self.on_block = argv, cwd, on_block
        self.separator, self.stdin_data, self.run_info = separator, stdin_data, run
        self.on_output_end = on_output_end
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._stopping = False

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            if self._proc is not None and self._proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    self._proc.kill()

    def run(self) -> bool:
        """True when rg's output was read to its end, False when it was stopped."""
        proc = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            stdin=subprocess.DEVNULL if self.stdin_data is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            bufsize=0,
        )
        with self._lock:
            self._proc = proc
            if self._stopping:
                proc.kill()
        lower_priority(proc.pid)
        assert proc.stdout is not None and proc.stderr is not None
        _widen_pipe(proc.stdout.fileno())
        stderr = bytearray()
        finished = False
        try:
            with selectors.DefaultSelector() as selector:
                finished = self._pump(proc, selector, stderr)
            ended = finished or not self._stopping  # not stopped from outside
            if not finished:
                self.stop()
            if ended and self.on_output_end is not None:
                self.on_output_end()
            return finished
        finally:
            if not finished:
                self.stop()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()
            # rg has exited or was killed: what is left on stderr ends soon (its message
            # for a bad pattern may come after stdout closed)
            while chunk := proc.stderr.read(READ_CHUNK):
                stderr += chunk[: max(0, STDERR_CAP - len(stderr))]
            proc.stderr.close()
            proc.wait()
            self.run_info.returncode = proc.returncode
            self.run_info.stderr = stderr.decode("utf-8", "replace")

    def _pump(
        self, proc: subprocess.Popen[bytes], selector: selectors.BaseSelector, stderr: bytearray
    ) -> bool:
        """Read rg's stdout (cut into blocks), its stderr (capped) and write its stdin, until
        stdout ends (True) or the consumer or ``stop`` has had enough (False)."""
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.fileno(), proc.stderr.fileno()
        selector.register(out, selectors.EVENT_READ)
        selector.register(err, selectors.EVENT_READ)
        data = memoryview(self.stdin_data or b"")
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
        blocks = _Blocks(self.separator, self.on_block, self.run_info)
        while True:
            for key, _events in selector.select():
                if self._stopping:  # killed from the event loop (timeout, cancellation)
                    return False
                fd = key.fd
                if fd == out:
                    chunk = os.read(out, READ_CHUNK)
                    if not chunk:
                        return not self._stopping and blocks.end()
                    if not blocks.feed(chunk):
                        return False
                    if len(chunk) < READ_CHUNK:
                        time.sleep(PUMP_NAP)
                elif fd == err:
                    chunk = os.read(err, READ_CHUNK)
                    if not chunk:
                        selector.unregister(err)
                    else:
                        stderr += chunk[: max(0, STDERR_CAP - len(stderr))]
                else:
                    assert proc.stdin is not None
                    try:
                        data = data[os.write(fd, data) :]
                    except BlockingIOError:
                        continue
                    except OSError:  # rg is gone (EPIPE) or stopped reading
                        data = data[:0]
                    if not data:
                        selector.unregister(fd)
                        proc.stdin.close()


def _widen_pipe(fd: int) -> None:
    """A larger pipe lets rg run ahead of the reader instead of blocking on every 64 KiB."""
    setpipe = getattr(fcntl, "F_SETPIPE_SZ", None)  # Linux only
    if setpipe is not None:
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, setpipe, PIPE_BYTES)


class _Blocks:
    """Cuts rg's output into blocks of whole records for ``on_block``."""

    def __init__(self, separator: bytes, on_block: Callable[[bytes], bool], run: RgRun) -> None:
        self.separator, self.on_block, self.run = separator, on_block, run
        self.pending = bytearray()  # the start of a record that the next chunk continues
        self.skipping = False  # inside a record that outgrew MAX_RECORD_BYTES

    def _emit(self, block: bytes) -> bool:
        self.run.blocks += 1
        return self.on_block(block)

    def end(self) -> bool:
        if self.pending and not self.skipping:
            return self._emit(bytes(self.pending) + self.separator)
        return True

    def feed(self, chunk: bytes) -> bool:
        separator = self.separator
        last = chunk.rfind(separator)
        if last < 0:
            if not self.skipping:
                self.pending += chunk
                if len(self.pending) > MAX_RECORD_BYTES:
                    self.pending.clear()
                    self.skipping = True
                    self.run.dropped_records += 1
            return True
        if self.skipping:  # the oversized record ends in this chunk: drop its tail
            block = chunk[chunk.find(separator) + 1 : last + 1]
            self.skipping = False
        elif self.pending:
            block = bytes(self.pending) + chunk[: last + 1]
        else:
            block = chunk[: last + 1]
        self.pending = bytearray(chunk[last + 1 :])
        return not block or self._emit(block)


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
    rg_exact: bool = False  # rg's file type selects exactly what the glob does
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

    def keep(self, paths: list[str]) -> list[str]:
        """``accepts`` over many paths at once (rg's paths lie under ``walk``, so under the
        target): the regex runs on each path from the prefix's end, without slicing."""
        if self.regex is None or self.rg_exact:
            return paths
        match, start, target = self.regex.match, len(self._prefix), self._target
        return [p for p in paths if p == target or (p.startswith(self._prefix) and match(p, start))]


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
    # "*.py", "**/*.py", "**/*": only '*', '?' and literals in a name at any depth, which the
    # file type matches exactly; then rg's listing needs no second look.
    exact = (
        bool(rg_args)
        and not negate
        and all(s == "**" for s in segments[:-1])
        and not any(c in name for c in "[{\\")
    )
    return FileFilter(target, walk, rg_args, regex, rg_exact=exact)


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
    limit: int | None = None,
    only: set[str] | None = None,
    mtimes: dict[str, float] | None = None,
) -> tuple[list[str], list[RgRun], bool]:
    """The files rg finds for ``filters`` (at most ``limit``); True when there were more.

    With ``only``, just those paths are kept (to learn which of them rg would search). With
    ``mtimes``, each kept file's modification time is stored there, read in the worker thread
    while rg is still walking (the stat calls overlap rg's run instead of following it).
    """
    cap = LIST_COLLECT_LIMIT if limit is None else limit
    found: list[str] = []
    more = False
    runs = []
    for file_filter in filters:
        if not file_filter.walk.exists():
            continue

        def collect(
            block: bytes, keep: Callable[[list[str]], list[str]] = file_filter.keep
        ) -> bool:
            nonlocal more
            paths = os.fsdecode(block).split("\0")[:-1]  # one decode per block, not per path
            if "" in paths:
                paths = [p for p in paths if p]
            paths = keep(paths)
            if only is not None:
                paths = [p for p in paths if p in only]
            if len(found) + len(paths) > cap:
                paths = paths[: cap - len(found)]
                more = True
            found.extend(paths)
            if mtimes is not None:
                stat = os.stat
                for path in paths:
                    try:
                        mtimes[path] = stat(path).st_mtime
                    except OSError:
                        mtimes[path] = 0.0
            return not more

        runs.append(
            await run_rg(
                list_argv(file_filter),
                _cwd(file_filter.target),
                collect,
                time_limit=time_limit,
                separator=b"\0",
            )
        )
    return found, runs, more


def list_argv(file_filter: FileFilter) -> list[str]:
    """rg's arguments (after the binary) for listing what ``file_filter`` walks."""
    return ["--files", "--null", *COMMON_ARGS, *file_filter.rg_args, "--", str(file_filter.walk)]


def grep_argv(pattern: str, file_filter: FileFilter) -> list[str]:
    """rg's arguments (after the binary) for searching ``pattern`` where the filter walks."""
    return [*SEARCH_ARGS, *file_filter.rg_args, "-e", pattern, "--", str(file_filter.walk)]


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


def _temp_dir() -> Path:
    import tempfile  # here, not at start-up: ~4 ms, for an unsaved buffer's search only

    return Path(tempfile.gettempdir())


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

    shown: dict[str, str] = {}  # a file's matches are shown one after the other

    def display(path: str) -> str:
        text = shown.get(path)
        if text is None:
            text = shown[path] = _display(path)
        return text

    def _display(path: str) -> str:
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
    model_config = ConfigDict(defer_build=True)  # built at its first call (schemas.py)

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
            mtimes: dict[str, float] = {}
            found, runs, more = await collect_files(filters, time_limit=self.timeout, mtimes=mtimes)
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

        shown, total = await asyncio.to_thread(_newest_first, found, MAX_LISTED_FILES, mtimes)
        display = _displayer(ctx.workspace)
        lines = [display(p) for p in shown]
        omitted = total - len(lines)
        if more:
            lines.append(f"(more than {omitted:,} more files not shown; narrow the pattern)")
        elif omitted:
            lines.append(f"({omitted:,} more files not shown; narrow the pattern)")
        if timed_out:
            lines.append(f"(listing stopped after {self.timeout:g} s; results are incomplete)")
        return ToolResult(cap_text("\n".join(lines)), raw_output={"count": total})


def _newest_first(
    paths: list[str], limit: int, mtimes: dict[str, float] | None = None
) -> tuple[list[str], int]:
    """The ``limit`` newest of ``paths`` (ties by path) and how many distinct paths there are.

    ``mtimes`` holds the times already read (of some of ``paths``, no others); the rest are
    read here. Only the files at or above the ``limit``-th newest time are sorted by path:
    sorting every path of a large listing costs more than the listing's own Python work.
    """
    times = {} if mtimes is None else mtimes
    for path in paths:
        if path not in times:
            times[path] = _mtime(path)
    chosen = list(times)
    if len(chosen) > limit:
        cutoff = heapq.nlargest(limit, times.values())[-1]
        chosen = [p for p, t in times.items() if t >= cutoff]
    chosen.sort()
    chosen.sort(key=times.__getitem__, reverse=True)  # stable: ties stay sorted by path
    return chosen[:limit], len(times)


# --------------------------------------------------------------------------- grep_search


class GrepSearchInput(BaseModel):
    model_config = ConfigDict(defer_build=True)  # built at its first call (schemas.py)

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


@dataclass(slots=True)
class _Segment:
    """Match lines of one file, kept as rg's raw output ``block[start:end]``: they are
    parsed only when shown, and only as far as the answer reads."""

    path: str
    block: bytes
    start: int
    end: int

    def matches(self) -> Iterator[Match]:
        path = self.path
        for number, text in self.numbered():
            yield Match(path, int(number), text)

    def numbered(self) -> Iterator[tuple[str, str]]:
        """Each match line's number (as rg printed it) and its text as shown."""
        data = self.block[self.start : self.end]
        if data.isascii() and b"\r" not in data:  # most code: one decode, no terminators
            short = MAX_LINE_CHARS
            for line in data.decode("ascii").split("\n"):
                fields = line.split("\0", 2)
                if len(fields) < 3:  # rg's notice about a binary file, or the segment's end
                    continue
                number, column, text = fields
                yield number, text if len(text) <= short else _clip(text, int(column) - 1)
            return
        for match in self._parsed(data):
            yield str(match.line), match.text

    def _parsed(self, data: bytes) -> Iterator[Match]:
        path, match, short = self.path, Match, MAX_LINE_CHARS
        for line in data.split(b"\n"):
            fields = line.split(FIELD_SEP, 2)
            if len(fields) < 3:  # rg's notice about a binary file, or the segment's end
                continue
            number, column, raw = fields
            if raw.isascii():
                if len(raw) <= short:  # nothing to clip around the match
                    yield match(path, int(number), raw.decode("ascii").rstrip("\r\n"))
                    continue
                text = raw.decode("ascii")
                start = int(column) - 1
            else:  # rg's column counts bytes
                text = raw.decode("utf-8", "replace")
                start = _chars_before(raw, int(column) - 1)
            yield Match.of(path, int(number), text, start)


def _chars_before(raw: bytes, offset: int) -> int:
    """How many characters the first ``offset`` bytes of the line ``raw`` decode to."""
    return len(raw[:offset].decode("utf-8", "replace"))


class _HeadingReader:
    """Cuts one rg run's ``--heading`` output into the match lines of each file.

    A file's section is its path on a line of its own, its match lines (``number SEP column
    SEP text``, with ``FIELD_SEP``, a byte no path or searched line holds) and, for a binary
    file, rg's notice; an empty line separates sections. A path may hold line breaks: it
    runs to the line of its file's first match. rg's output comes in whole lines, and a
    section may span blocks.
    """

    def __init__(self) -> None:
        self.path = ""
        self.header: bytearray | None = bytearray()  # a path being read (the output starts so)

    def segments(self, block: bytes, end: int | None = None) -> list[_Segment]:
        """The files' match lines in ``block[:end]``, in order (the first may continue the
        file the previous block ended in)."""
        found: list[_Segment] = []
        n = len(block) if end is None else end
        pos = 0
        if self.header is None and block.startswith(b"\n"):  # the empty line between files
            self.header, pos = bytearray(), 1
        while pos < n:
            if self.header is not None:
                sep = block.find(FIELD_SEP, pos, n)
                if sep < 0:  # the path goes on in the next block (or this is a notice)
                    if len(self.header) < MAX_HEADER_BYTES:
                        self.header += block[pos:n]
                    return found
                line = block.rfind(b"\n", pos, sep) + 1 or pos  # the first match's line
                raw = (
                    block[pos : line - 1]
                    if not self.header
                    else bytes(self.header + block[pos:line])[:-1]
                )
                self.path = raw.decode(FS_ENCODING, FS_ERRORS)
                self.header, pos = None, line
            gap = block.find(b"\n\n", pos, n)  # the end of a match line, then the empty line
            if gap < 0:
                found.append(_Segment(self.path, block, pos, n))
                return found
            found.append(_Segment(self.path, block, pos, gap + 1))
            self.header, pos = bytearray(), gap + 2
        return found

    def notices(self) -> list[tuple[str, str, str]]:
        """rg's notices outside any file's section, "PATH: binary file matches (...)" for a
        binary file rg was named (it shows none of their lines), split at BINARY_NOTICE."""
        if not self.header:
            return []
        lines = os.fsdecode(bytes(self.header)).splitlines()
        return [line.partition(BINARY_NOTICE) for line in lines if BINARY_NOTICE in line]


class _MatchCollector:
    """Keeps the first matches rg prints and counts the rest, skipping rejected files.

    rg's output is read block by block with ``bytes.find``/``count``: a match line holds
    two ``FIELD_SEP`` bytes and nothing else does, a file's kept matches are one slice of a
    block, and past ``MATCH_STORE_LIMIT`` they are only counted. Parsing every line in
    Python held the GIL long enough to delay the server's event loop by milliseconds.

    A collector that takes every file from a single rg run reads whole blocks: it counts
    their matches, counts files by the empty lines between them (rg prints a file only
    with a match, and a run prints each file once) and keeps the blocks that hold the first
    ``MATCH_STORE_LIMIT`` matches, cut into files only when the answer is read. The thread
    reading rg's output then takes well under a millisecond of CPU from rg instead of
    several (each of its milliseconds is most of a millisecond of rg's, on two cores).
    A file name holding an empty line (two line breaks in a row) is counted twice there.
    """

    def __init__(
        self, accepts: Callable[[str], bool] | None, *, runs: int = 1, walk: str | None = None
    ) -> None:
        self.accepts = accepts  # None: every file is taken
        self.kept: list[_Segment | Match] = []  # in arrival order
        self.kept_count = 0
        self.files: set[str] = set()  # files with a counted match, by path ...
        self.counted_files = 0  # ... and those counted by the lines between them
        self.total = 0
        self.more = False
        self._whole_blocks = accepts is None and runs == 1
        self._blocks: list[tuple[bytes, int]] = []  # whole blocks kept: (block, end of kept)
        # Whole blocks: what separates two files, the empty line and the start of the next
        # path. rg prints every path under ``walk`` as it was given, and a longer needle is
        # found several times faster than the two line breaks alone.
        self._walk = os.fsencode(walk) if walk else b""
        self._gap = b"\n\n" + self._walk
        self._readers: list[_HeadingReader] = []
        self._lock = threading.Lock()  # several rg runs (one per root) feed one collector

    @property
    def file_count(self) -> int:
        """How many files have a counted match."""
        return len(self.files) + self.counted_files

    def feed(self) -> Callable[[bytes], bool]:
        """The consumer of one rg run's blocks (each run has its own current file)."""
        reader = _HeadingReader()
        self._readers.append(reader)
        verdicts: dict[str, bool] = {}
        open_counted = False  # whole blocks: the file whose lines go on has a counted match

        def on_block(block: bytes) -> bool:
            nonlocal open_counted
            with self._lock:
                if self._whole_blocks:
                    go_on, open_counted = self._take_block(block, open_counted)
                    return go_on
                for segment in reader.segments(block):
                    taken = verdicts.get(segment.path)
                    if taken is None:
                        accepts = self.accepts
                        taken = verdicts[segment.path] = accepts is None or accepts(segment.path)
                    if taken and not self._take(segment):
                        return False
                return True

        return on_block

    def _take_block(self, block: bytes, open_counted: bool) -> tuple[bool, bool]:
        """Count (and while there is room, keep) the matches of a whole block and count its
        files; returns whether to go on (False once a match beyond MATCH_COUNT_LIMIT shows
        up) and whether the file still open at the block's end has a counted match."""
        if self.total == 0 and not self._blocks and not block.startswith(self._walk):
            self._gap = b"\n\n"  # rg printed the paths otherwise: the plain gap
        gap = self._gap
        room = MATCH_COUNT_LIMIT - self.total
        separators = block.count(FIELD_SEP)
        count = separators // 2
        end = len(block)
        if count > room:  # only what comes before the first match past the cap counts
            end = block.rfind(b"\n", 0, _nth(block, 2 * room + 1, total=separators)) + 1
            count, self.more = room, True
        room_kept = MATCH_STORE_LIMIT - self.kept_count
        if room_kept > 0:  # kept even without a match: its paths name the files
            keep = min(count, room_kept)
            stop = end
            if keep < count:
                stop = block.find(b"\n", _nth(block, 2 * keep, total=separators)) + 1
            self._blocks.append((block, stop))
            self.kept_count += keep
        # A file starts after each empty line (one may open the block: the previous block
        # ended with the last line of a file) and is counted once one of its matches is.
        first = 0 if block.startswith(b"\n") else block.find(gap, 0, end)
        if not open_counted and block.find(FIELD_SEP, 0, end if first < 0 else first) >= 0:
            self.counted_files += 1
            open_counted = True
        if first >= 0:
            starts = block.count(gap, 0, end) + block.startswith(b"\n")
            last = block.rfind(gap, 0, end)
            last = 1 if last < 0 else last + 2  # where the last file to start here starts
            open_counted = block.find(FIELD_SEP, last, end) >= 0
            self.counted_files += starts - (not open_counted)
        if block.endswith(b"\n\n", 0, end):  # the next file starts the next block
            open_counted = False
        self.total += count
        return not self.more, open_counted

    def _block_segments(self) -> list[_Segment]:
        """The kept whole blocks cut into one segment per file, in rg's order."""
        return self._segments(*self._kept_pieces()) if self._blocks else []

    def _kept_pieces(self) -> tuple[list[bytes], list[int]]:
        """The kept whole blocks joined (the start of one run's output) and cut at the gaps
        between files: each piece is a path, then that file's match lines. With each, where
        its first FIELD_SEP is (-1: none, a path with no kept match, or one holding the gap)."""
        data = b"".join(block if end == len(block) else block[:end] for block, end in self._blocks)
        pieces = data.split(self._gap)
        return pieces, [piece.find(FIELD_SEP) for piece in pieces]

    def _segments(self, pieces: list[bytes], seps: list[int]) -> list[_Segment]:
        """``_kept_pieces`` as segments, each path decoded."""
        encoding, errors, gap = FS_ENCODING, FS_ERRORS, self._gap
        after_gap = gap[2:].decode(encoding, errors)  # what the gap took of the next path
        if -1 in seps[:-1]:  # a path holding the gap was cut there: join it to the next
            return self._joined_segments(pieces, gap, after_gap)
        if seps and seps[-1] < 0:  # the kept bytes end with a path: a file with no kept match
            pieces, seps = pieces[:-1], seps[:-1]
        # A path ends before its first match's line.
        lines = [piece.rfind(b"\n", 0, sep) for piece, sep in zip(pieces, seps, strict=True)]
        return [
            _Segment(
                (after_gap if index else "") + piece[:line].decode(encoding, errors),
                piece,
                line + 1,
                len(piece),
            )
            for index, (piece, line) in enumerate(zip(pieces, lines, strict=True))
        ]

    def _whole_ordered(self) -> Iterator[Match]:
        """``ordered`` for the kept whole blocks of one run, where each file comes once."""
        for segment in self._whole_segments():
            yield from segment.matches()

    def _whole_segments(self) -> Iterator[_Segment]:
        """The kept whole blocks of one run, one segment per file (each file comes once),
        by path.

        The paths are sorted as bytes (UTF-8 keeps the order of the characters) and only
        those of the files shown are decoded; paths that are not UTF-8 take the long way.
        """
        gap = self._gap
        pieces, seps = self._kept_pieces()
        if seps[-1] < 0:  # the kept bytes end with a path: a file with no kept match
            pieces, seps = pieces[:-1], seps[:-1]
        lines = [piece.rfind(b"\n", 0, sep) for piece, sep in zip(pieces, seps, strict=True)]
        tails = [piece[:line] for piece, line in zip(pieces, lines, strict=True)]
        if tails:
            tails[0] = tails[0][len(gap) - 2 :]  # every path after the searched one, as the rest
        try:
            if -1 in seps or FS_ENCODING != "utf-8":
                raise UnicodeError("paths to take the long way")
            b"\n".join(tails).decode("utf-8")
        except UnicodeError:
            yield from sorted(self._segments(pieces, seps), key=attrgetter("path"))
            return
        walk = gap[2:].decode(FS_ENCODING, FS_ERRORS)
        for i in sorted(range(len(tails)), key=tails.__getitem__):
            piece = pieces[i]
            yield _Segment(walk + tails[i].decode("utf-8"), piece, lines[i] + 1, len(piece))

    @staticmethod
    def _joined_segments(pieces: list[bytes], gap: bytes, after_gap: str) -> list[_Segment]:
        """``_block_segments`` where a piece holds no match line: a path holding the gap
        was cut there, and the piece goes on in the next."""
        segments: list[_Segment] = []
        carried, carried_head = b"", ""
        for index, piece in enumerate(pieces):
            head = after_gap if index else ""
            if carried:
                piece, head, carried = carried + gap + piece, carried_head, b""
            sep = piece.find(FIELD_SEP)
            if sep < 0:
                carried, carried_head = piece, head
                continue
            line = piece.rfind(b"\n", 0, sep)
            path = head + piece[:line].decode(FS_ENCODING, FS_ERRORS)
            segments.append(_Segment(path, piece, line + 1, len(piece)))
        return segments

    def notices(self) -> list[tuple[str, str, str]]:
        """rg's notices for binary files named as the search path; read them only when no
        line matched (the kept blocks then hold all of rg's output)."""
        readers = self._readers
        if self._whole_blocks:
            readers = [_HeadingReader()]
            for block, end in self._blocks:
                readers[0].segments(block, end)
        return [line for reader in readers for line in reader.notices()]

    def _take(self, segment: _Segment) -> bool:
        """Count (and while there is room, keep) the matches of ``segment``; False once a
        match beyond MATCH_COUNT_LIMIT shows up."""
        block, start, end = segment.block, segment.start, segment.end
        count = block.count(FIELD_SEP, start, end) // 2
        if not count:
            return True
        if self.total >= MATCH_COUNT_LIMIT:
            self.more = True
            return False
        self.files.add(segment.path)  # one of its matches is counted
        counted = min(count, MATCH_COUNT_LIMIT - self.total)
        keep = min(counted, MATCH_STORE_LIMIT - self.kept_count)
        if keep > 0:
            stop = end
            if keep < count:  # the segment ends after its keep-th match
                stop = block.find(b"\n", _nth(block, 2 * keep, start, end)) + 1
            self.kept.append(_Segment(segment.path, block, start, stop))
            self.kept_count += keep
        self.total += counted
        if count > counted:
            self.more = True
            return False
        return True

    def add(self, found: list[Match]) -> None:
        self.files.update(m.path for m in found)
        self.total += len(found)
        self.kept.extend(found)
        self.kept_count += len(found)

    def by_file(self) -> Iterator[tuple[str, Iterator[tuple[str, str]]]]:
        """``ordered`` grouped by file: each path with its match lines' numbers and texts
        (for the answer, which needs no :class:`Match` for them)."""
        if not self.kept:
            for segment in self._whole_segments():
                yield segment.path, segment.numbered()
            return
        for path, matches in groupby(self.ordered(), key=attrgetter("path")):
            yield path, ((str(m.line), m.text) for m in matches)

    def ordered(self) -> Iterator[Match]:
        """The kept matches by path and line, parsed as they are read.

        A file's matches from one segment are in line order already (rg prints a file's
        matches in order); a path kept in several pieces (split across blocks, searched
        from two roots, an open buffer) is sorted by line, stably, as one list would be.
        """
        if not self.kept:  # one run's whole blocks, where each file comes once
            yield from self._whole_ordered()
            return
        groups: dict[str, list[_Segment | Match]] = {}
        for item in [*self._block_segments(), *self.kept]:
            groups.setdefault(item.path, []).append(item)
        for path in sorted(groups):
            items = groups[path]
            if len(items) == 1 and isinstance(items[0], _Segment):
                yield from items[0].matches()
                continue
            found: list[Match] = []
            for item in items:
                found.extend(item.matches() if isinstance(item, _Segment) else [item])
            found.sort(key=attrgetter("line"))
            yield from found


def _nth(
    data: bytes, n: int, start: int = 0, end: int | None = None, *, total: int | None = None
) -> int:
    """Where the ``n``-th (from 1) FIELD_SEP in ``data[start:end]`` is, -1 if there are
    fewer; ``total`` is how many there are, when the caller counted them already.

    Separators are spread about evenly: one count up to where the ``n``-th should be, then a
    ``find`` (a ``memchr``) per separator it is off by, instead of one per separator.
    """
    hi = len(data) if end is None else end
    if total is None:
        total = data.count(FIELD_SEP, start, hi)
    if not 0 < n <= total:
        return -1
    guess = start + (hi - start) * n // total
    below = data.count(FIELD_SEP, start, guess)
    if below < n:  # the n-th is the (n - below)-th from the guess on
        at = guess - 1
        for _ in range(n - below):
            at = data.find(FIELD_SEP, at + 1, hi)
        return at
    at = guess  # the n-th is the (below - n + 1)-th back from the guess
    for _ in range(below - n + 1):
        at = data.rfind(FIELD_SEP, start, at)
    return at


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
        states = await asyncio.to_thread(_disk_states, [b for b, _ in scoped]) if scoped else []
        dirty = [(b, f) for s, (b, f) in zip(states, scoped, strict=True) if s == "dirty"]
        new = [(b, f) for s, (b, f) in zip(states, scoped, strict=True) if s == "new"]
        dirty_paths = {str(b.path) for b, _ in dirty}

        def accepts(path: str) -> bool:
            if path in dirty_paths:
                return False
            return any(f.accepts(path) for f in filters if f.contains(path))

        # No include glob and no dirty buffer: every file rg prints is taken, unasked.
        everything = not dirty_paths and all(f.regex is None for f in filters)
        walked = [f for f in filters if f.walk.exists()]
        walk = str(walked[0].walk) if len(walked) == 1 else None
        collector = _MatchCollector(None if everything else accepts, runs=len(walked), walk=walk)
        # With one rg run and no buffer to add, the answer is known once rg's output ends:
        # formatted in rg's thread while rg exits, not after another trip through the loop.
        early: list[str] = []
        if len(walked) == 1 and not dirty and not new:

            def format_early() -> None:
                early.append(_format_matches(collector, ctx.workspace))

            on_end: Callable[[], object] | None = format_early
        else:
            on_end = None
        try:
            async with asyncio.TaskGroup() as group:
                searches = [
                    group.create_task(self._rg_search(args.pattern, f, collector, on_end))
                    for f in walked
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
            if notices := collector.notices():  # a binary file named as the path
                display = _displayer(ctx.workspace)
                shown = [display(path) + BINARY_NOTICE + rest for path, _, rest in notices]
                return ToolResult("\n".join(shown), raw_output={"matches": 0})
            return ToolResult(f"No matches for {args.pattern}", raw_output={"matches": 0})
        # Parsing and formatting up to MAX_SHOWN_MATCHES records takes milliseconds: off the
        # event loop, so control requests are not held behind it.
        if early:
            text = early[0]
        else:
            text = await asyncio.to_thread(_format_matches, collector, ctx.workspace)
        if timed_out:
            text += f"\n(search stopped after {self.timeout:g} s; results are incomplete)"
        if dropped := sum(r.dropped_records for r in runs):
            text += f"\n({dropped:,} matches on extremely long lines not shown)"
        return ToolResult(
            cap_text(text), raw_output={"matches": collector.total, "files": collector.file_count}
        )

    async def _rg_search(
        self,
        pattern: str,
        file_filter: FileFilter,
        collector: _MatchCollector,
        on_output_end: Callable[[], object] | None = None,
    ) -> RgRun:
        return await run_rg(
            grep_argv(pattern, file_filter),
            _cwd(file_filter.target),
            collector.feed(),
            time_limit=self.timeout,
            on_output_end=on_output_end,
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
            collector = _MatchCollector(None)
            run = await run_rg(
                [*PRINT_ARGS, "--no-config", "-e", pattern, "-"],
                _cwd(buffer.path) if buffer.path.parent.is_dir() else _temp_dir(),
                collector.feed(),
                time_limit=self.timeout,
                stdin_data=buffer.text.encode("utf-8", "surrogatepass"),
            )
            if run.fatal:
                raise SearchError(_clean_rg_error(run.stderr, pattern))
            found += [Match(str(buffer.path), m.line, m.text) for m in collector.ordered()]
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
    for path, numbered in collector.by_file():
        if len(shown) == MAX_SHOWN_MATCHES or budget < 0:
            break
        prefix = display(path)
        for number, text in numbered:
            line = f"{prefix}:{number}: {text}"
            budget -= len(line) + 1
            if budget < 0 or len(shown) == MAX_SHOWN_MATCHES:
                break
            shown.append(line)
    omitted = collector.total - len(shown)
    if omitted:
        more = "more than " if collector.more else ""
        files = collector.file_count
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
