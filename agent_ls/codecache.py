"""A cache of what the standard library compiles at every start, like ``__pycache__`` for .py.

Every ``@dataclass`` compiles its ``__init__``, ``__repr__``, ``__eq__``… from source text, every
string annotation becomes a ``typing.ForwardRef`` that compiles its expression, every
``namedtuple`` evaluates its ``__new__``, and every regular expression is parsed and compiled
to its program by ``re``'s pure-Python compiler: ~1,600 compiles before the server answers
its first ask (~70 ms of CPU, more than any one library's import), the same text at every
start. :func:`install` makes ``dataclasses``, ``typing`` and ``collections`` call a builtin
that hands out the code objects compiled by an earlier process for exactly the same source,
file name, mode and future flags (the flags of the module that compiles, as the builtin would
inherit them), and ``re`` build a pattern from the program an earlier process compiled for
the same pattern and flags (what ``re`` gave ``_sre.compile``; not for ``re.LOCALE``, whose
program depends on the locale). The rest is compiled as usual, and :func:`save` writes it.
The file is keyed by the interpreter's bytecode magic and optimisation level, so another
Python ignores it; anything unreadable is ignored and rewritten. The code and the programs
are the compiler's, byte for byte: only where they come from changes.

The processes of one run share it: the ``agent-ls`` program installs it first thing, and the
server and model worker a headless run forks inherit what it loaded.
"""

from __future__ import annotations
import __future__

import _sre
import builtins
import contextlib
import logging
import marshal
import os
import re
import sys
import threading
import time
import types
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

try:  # the C module itself: hashlib would load OpenSSL first (~5 ms of every start)
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - a Python built without it
    from hashlib import blake2b as _blake2b

log = logging.getLogger(__name__)

# A few sources differ at every start (tokenize's pattern lists string prefixes in a set's
# order, which follows the hash seed): compiled anew each time, they are written only along
# with more, so they neither rewrite the file at every start nor grow it much.
MIN_NEW = 8  # entries, and
NEW_SHARE = 0.02  # of those used: fewer compiled anew, and nothing is written
MAX_ENTRIES = 8_000  # a file grown past this is rewritten with what this process used
SAVE_WAIT = 2.0  # seconds: longer, and a save gives up (another is writing, or never ends)

FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag

_compile = builtins.compile


def read_marshal(path: Path, what: str) -> Any:
    """What ``path`` holds, written by :func:`write_marshal` for this bytecode version; None
    when it is missing, another Python's or unreadable (``what`` names it in the log)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data.startswith(MAGIC_NUMBER):
        return None
    try:
        return marshal.loads(data[len(MAGIC_NUMBER) :])
    except (EOFError, ValueError, TypeError):
        log.info("ignoring an unreadable %s: %s", what, path)
        return None


def write_marshal(path: Path, value: Any, what: str) -> bool:
    """Replace ``path`` with ``value`` at once (a reader sees the old file or the new one)."""
    import tempfile  # here: ~8 ms to import, and most starts write nothing

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(MAGIC_NUMBER + marshal.dumps(value))
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except (OSError, ValueError) as exc:  # ValueError: a value marshal cannot write
        log.info("could not write the %s %s: %s", what, path, exc)
        return False
    return True


@dataclass
class CacheStats:
    """What the cache did in this process (for tests and the log)."""

    hits: int = 0
    misses: int = 0
    written: int = 0  # times save() wrote the file


def _key(*parts: str | bytes) -> bytes:
    text = b"\0".join(
        p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass") for p in parts
    )
    return _blake2b(text, digest_size=16).digest()


class _Cache:
    """Entries by key, each kept marshalled until a process uses it: the client loads the
    file before it forks, so what only the server or the worker uses is decoded there, on
    another core, not on the path every process waits for."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.known = _load(path)
        self.new: dict[bytes, bytes] = {}
        self.used: set[bytes] = set()
        self.stats = CacheStats()
        self.lock = threading.Lock()  # one save at a time (the server saves from threads)

    def _get(self, key: bytes, kind: type) -> Any:
        self.used.add(key)
        raw = self.known.get(key)
        if raw is None:
            return None
        try:
            value = marshal.loads(raw)
        except (EOFError, ValueError, TypeError):
            return None
        if not isinstance(value, kind):
            return None
        self.stats.hits += 1
        return value

    def _put(self, key: bytes, value: Any) -> None:
        raw = marshal.dumps(value)
        self.known[key] = self.new[key] = raw
        self.stats.misses += 1

    def code(self, source: str, filename: str, mode: str, flags: int) -> CodeType:
        key = _key(mode, str(flags), filename, source)
        code = self._get(key, CodeType)
        if code is None:
            code = _compile(source, filename, mode, flags, True)
            self._put(key, code)
        return code

    def pattern(self, compile_: Any, pattern: str | bytes, flags: int) -> re.Pattern[Any]:
        """``re``'s compile of ``pattern``: the compiled program from the cache, or compiled
        by ``compile_`` (``re._compiler.compile``) and kept."""
        if not isinstance(flags, int) or flags & (re.LOCALE | re.DEBUG):
            return compile_(pattern, flags)  # LOCALE's program depends on the locale then
        kind = "re-bytes" if isinstance(pattern, bytes) else "re-str"
        key = _key(kind, str(flags), pattern)
        args = self._get(key, tuple)
        if args is not None:
            return _sre.compile(pattern, *args)
        _captured.args = None
        compiled = compile_(pattern, flags)
        args, _captured.args = _captured.args, None
        if isinstance(args, tuple) and args[0] is pattern:
            flags_, program, *rest = args[1:]  # the program's opcodes are named ints: plain
            self._put(key, (flags_, [int(op) for op in program], *rest))
        return compiled

    def save(self) -> None:
        # Bounded: a process forked while another thread wrote holds that lock for ever.
        if not self.lock.acquire(timeout=SAVE_WAIT):
            return
        try:
            if len(self.new) < max(MIN_NEW, NEW_SHARE * len(self.used)):
                return  # kept for a later save of this process, when there is more
            new, self.new = self.new, {}
            # The processes of a run write at about the same time (the worker after its last
            # stream, the server at exit): one at a time, or one loses what another wrote.
            with _file_lock(self.path):
                on_disk = _load(self.path)  # what other processes wrote meanwhile stays
                if len(on_disk) + len(new) > MAX_ENTRIES:
                    on_disk = {k: v for k, v in self.known.items() if k in self.used}
                if write_marshal(self.path, {**on_disk, **new}, "code cache"):
                    self.stats.written += 1
        finally:
            self.lock.release()


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """Hold ``path``'s lock file (``flock``) for the block, waiting at most :data:`SAVE_WAIT`;
    without one (no ``fcntl``, an unwritable folder, a holder that never lets go) the block
    runs all the same: the worst case is entries lost, compiled again next time."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = -1
    with contextlib.suppress(OSError):
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        deadline = time.monotonic() + SAVE_WAIT
        while fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.005)
        yield
    finally:
        if fd >= 0:
            os.close(fd)  # (closing releases the lock)


def _load(path: Path) -> dict[bytes, bytes]:
    entries = read_marshal(path, "code cache")
    if not isinstance(entries, dict) or not all(
        type(k) is bytes and type(v) is bytes for k, v in entries.items()
    ):
        return {}
    return entries


# What re._compiler passed _sre.compile last, in this thread (while _Cache.pattern asks).
_captured = threading.local()


def _capturing_sre() -> Any:
    """``_sre`` as ``re._compiler`` sees it, its ``compile`` telling what it was given."""
    compile_ = _sre.compile

    def capture(*args: Any) -> Any:
        _captured.args = args
        return compile_(*args)

    return types.SimpleNamespace(**{**vars(_sre), "compile": capture})


_cache: _Cache | None = None
_ABSENT = object()
_installed: list[tuple[ModuleType, str, Any]] = []  # and what was there before


def _flags_of(function: Any) -> int:
    return int(function.__code__.co_flags) & FUTURE_FLAGS


def _stand_in(cache: _Cache, name: str, flags: int) -> Any:
    """What stands in for the builtin ``name`` (``exec``, ``compile`` or ``eval``) in a module
    whose code compiles with the future ``flags``: the builtin, with the code from ``cache``."""
    if name == "compile":

        def compile_(source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
            if args or kwargs or type(source) is not str or type(filename) is not str:
                return _compile(source, filename, mode, *args, **kwargs)
            return cache.code(source, filename, mode, flags)

        return compile_
    run = builtins.exec if name == "exec" else builtins.eval

    def run_(source: Any, globals: Any = None, locals: Any = None, /, **kwargs: Any) -> Any:
        if type(source) is str and not kwargs:
            source = cache.code(source, "<string>", name, flags)
        if globals is None:  # the builtin would run it in the caller's namespaces
            frame = sys._getframe(1)
            globals, locals = frame.f_globals, frame.f_locals if locals is None else locals
        return run(source, globals, locals, **kwargs)

    return run_


def _re_as_expected() -> bool:
    """Whether ``re``'s compiler is the standard library's own, untouched."""
    compiler = getattr(re, "_compiler", None)
    compile_ = getattr(compiler, "compile", None)
    return (
        compiler is not None
        and getattr(compiler, "_sre", None) is _sre
        and getattr(compile_, "__module__", None) == "re._compiler"
        and getattr(compile_, "__qualname__", None) == "compile"
    )


def _hooks(cache: _Cache) -> list[tuple[ModuleType, str, Any]]:
    """The builtins each module calls with source text, and what stands in for them there;
    and ``re``'s compiler, whose programs come from the cache too."""
    import collections
    import dataclasses
    import typing

    compile_pattern = re._compiler.compile  # type: ignore[attr-defined]

    def pattern(p: Any, flags: int = 0) -> Any:
        if type(p) is str or type(p) is bytes:
            return cache.pattern(compile_pattern, p, flags)
        return compile_pattern(p, flags)  # a parsed pattern (sre internals)

    # A module's future imports are its every function's: the builtin would compile with them.
    return [
        (dataclasses, "exec", _stand_in(cache, "exec", _flags_of(dataclasses.dataclass))),
        (typing, "compile", _stand_in(cache, "compile", _flags_of(typing.ForwardRef.__init__))),
        (collections, "eval", _stand_in(cache, "eval", _flags_of(collections.namedtuple))),
        (re._compiler, "_sre", _capturing_sre()),  # type: ignore[attr-defined]
        (re._compiler, "compile", pattern),  # type: ignore[attr-defined]
    ]


def cover(module: ModuleType, name: str, function: Any) -> bool:
    """Stand in for the builtin ``name`` (``exec``, ``compile`` or ``eval``) in ``module`` too,
    a module imported after :func:`install` whose ``function`` calls it with source text
    (cattrs' code generation). False when the cache is not installed or the module has a
    ``name`` of its own."""
    cache = _cache
    if cache is None or name in vars(module) or name not in ("exec", "compile", "eval"):
        return False
    _installed.append((module, name, _ABSENT))
    setattr(module, name, _stand_in(cache, name, _flags_of(function)))
    return True


def default_path() -> Path:
    """The cache file in the data dir, one per bytecode version and optimisation level."""
    from agent_ls.dirs import data_dir

    return data_dir() / "cache" / f"code-{MAGIC_NUMBER.hex()}-O{sys.flags.optimize}.marshal"


def install(path: Path | None = None) -> CacheStats | None:
    """Use the cache in ``path`` (default: :func:`default_path`) for the rest of this process
    and its forks. Nothing happens when it is installed already, or when a module already has
    a name of its own where the cache would go."""
    global _cache
    if _cache is not None:
        return None
    try:
        cache = _Cache(path or default_path())
        if not _re_as_expected():
            return None
        hooks = _hooks(cache)
    except Exception as exc:  # a cache that cannot start costs its speed, nothing else
        log.info("code cache not used: %s", exc)
        return None
    if any(name in vars(module) for module, name, _ in hooks[:3]):
        return None  # someone else stands in for the builtin there: leave it alone
    for module, name, function in hooks:
        _installed.append((module, name, vars(module).get(name, _ABSENT)))
        setattr(module, name, function)
    _cache = cache
    return cache.stats


def uninstall() -> None:
    """Stop using the cache (what was compiled is not written: :func:`save` first)."""
    global _cache
    while _installed:
        module, name, before = _installed.pop()
        if before is _ABSENT:
            with contextlib.suppress(AttributeError):
                delattr(module, name)
        else:
            setattr(module, name, before)
    _cache = None


def save() -> None:
    """Write what this process compiled anew, if that is more than a few entries (best
    effort; cheap otherwise)."""
    cache = _cache
    if cache is not None and cache.new:
        cache.save()
        log.debug("code cache: %d hits, %d compiled", cache.stats.hits, cache.stats.misses)
