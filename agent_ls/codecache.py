"""A cache of the code the standard library compiles from strings, like ``__pycache__`` for .py.

Every ``@dataclass`` compiles its ``__init__``, ``__repr__``, ``__eq__``… from source text, every
string annotation becomes a ``typing.ForwardRef`` that compiles its expression, every
``namedtuple`` evaluates its ``__new__``: ~1,500 small compiles before the server answers its
first ask (~50 ms of CPU, more than any one library's import), the same text at every start.
:func:`install` makes ``dataclasses``, ``typing`` and ``collections`` call a ``compile`` that
hands out the code objects compiled by an earlier process for exactly the same source, file
name, mode and future flags (the flags of the module that compiles, as the builtin would
inherit them), and compiles the rest; :func:`save` writes what was compiled anew. The file is
keyed by the interpreter's bytecode magic and optimisation level, so another Python ignores
it; anything unreadable is ignored and rewritten. The code is the compiler's, byte for byte:
only where it comes from changes.

The processes of one run share it: the ``agent-ls`` program installs it first thing, and the
server and model worker a headless run forks inherit what it loaded.
"""

from __future__ import annotations
import __future__

import builtins
import contextlib
import hashlib
import logging
import marshal
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

log = logging.getLogger(__name__)

MAX_ENTRIES = 20_000  # a file grown past this is rewritten with what this process used

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


class _Cache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.known = _load(path)
        self.new: dict[bytes, CodeType] = {}
        self.used: set[bytes] = set()
        self.stats = CacheStats()
        self.lock = threading.Lock()  # one save at a time (the server saves from threads)

    def code(self, source: str, filename: str, mode: str, flags: int) -> CodeType:
        key = hashlib.blake2b(
            b"\0".join(
                (
                    mode.encode(),
                    str(flags).encode(),
                    filename.encode("utf-8", "surrogatepass"),
                    source.encode("utf-8", "surrogatepass"),
                )
            ),
            digest_size=16,
        ).digest()
        self.used.add(key)
        code = self.known.get(key)
        if code is not None:
            self.stats.hits += 1
            return code
        code = _compile(source, filename, mode, flags, True)
        self.known[key] = self.new[key] = code
        self.stats.misses += 1
        return code

    def save(self) -> None:
        with self.lock:
            if not self.new:
                return
            new, self.new = self.new, {}
            on_disk = _load(self.path)  # what other processes wrote meanwhile stays
            if len(on_disk) + len(new) > MAX_ENTRIES:
                on_disk = {k: v for k, v in self.known.items() if k in self.used}
            if write_marshal(self.path, {**on_disk, **new}, "code cache"):
                self.stats.written += 1


def _load(path: Path) -> dict[bytes, CodeType]:
    entries = read_marshal(path, "code cache")
    if not isinstance(entries, dict) or not all(
        isinstance(k, bytes) and isinstance(v, CodeType) for k, v in entries.items()
    ):
        return {}
    return entries


_cache: _Cache | None = None
_installed: list[tuple[ModuleType, str]] = []


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


def _hooks(cache: _Cache) -> list[tuple[ModuleType, str, Any]]:
    """The builtins each module calls with source text, and what stands in for them there."""
    import collections
    import dataclasses
    import typing

    # A module's future imports are its every function's: the builtin would compile with them.
    return [
        (dataclasses, "exec", _stand_in(cache, "exec", _flags_of(dataclasses.dataclass))),
        (typing, "compile", _stand_in(cache, "compile", _flags_of(typing.ForwardRef.__init__))),
        (collections, "eval", _stand_in(cache, "eval", _flags_of(collections.namedtuple))),
    ]


def cover(module: ModuleType, name: str, function: Any) -> bool:
    """Stand in for the builtin ``name`` (``exec``, ``compile`` or ``eval``) in ``module`` too,
    a module imported after :func:`install` whose ``function`` calls it with source text
    (cattrs' code generation). False when the cache is not installed or the module has a
    ``name`` of its own."""
    cache = _cache
    if cache is None or name in vars(module) or name not in ("exec", "compile", "eval"):
        return False
    setattr(module, name, _stand_in(cache, name, _flags_of(function)))
    _installed.append((module, name))
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
    cache = _Cache(path or default_path())
    hooks = _hooks(cache)
    if any(name in vars(module) for module, name, _ in hooks):
        return None  # someone else stands in for the builtin there: leave it alone
    for module, name, function in hooks:
        setattr(module, name, function)
        _installed.append((module, name))
    _cache = cache
    return cache.stats


def uninstall() -> None:
    """Stop using the cache (what was compiled is not written: :func:`save` first)."""
    global _cache
    while _installed:
        module, name = _installed.pop()
        with contextlib.suppress(AttributeError):
            delattr(module, name)
    _cache = None


def save() -> None:
    """Write what this process compiled anew, if anything (best effort, cheap otherwise)."""
    cache = _cache
    if cache is not None and cache.new:
        cache.save()
        log.debug("code cache: %d hits, %d compiled", cache.stats.hits, cache.stats.misses)
