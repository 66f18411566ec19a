"""A cache of the code attrs generates for lsprotocol's classes, like ``__pycache__`` for .py.

attrs writes each class's ``__init__``, ``__eq__``, ``__repr__``… as source text and compiles
it while the class is made: for lsprotocol's ~560 classes that is ~150 ms of every server
start (a third of its CPU before it answers ``initialize``), and the same text every time.
While the server imports pygls, :func:`attrs_code_cache` hands attrs the code objects compiled
by an earlier start for exactly the same source and file name (compiled as attrs would: same
future flags, same optimisation), and compiles the rest. The file holds what a start used,
nothing more (rewritten when over 2 % of it missed or went unused); it is keyed by the
interpreter's bytecode magic, so another Python ignores it; anything unreadable is ignored
and rewritten.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType, ModuleType
from typing import Any

from agent_ls.codecache import FUTURE_FLAGS, read_marshal, write_marshal

log = logging.getLogger(__name__)

REWRITE_SHARE = 0.02  # of the entries used: more missing or unused, and the file is rewritten


@dataclass
class CacheStats:
    """What one use of the cache did (for tests and the log)."""

    hits: int = 0
    misses: int = 0
    written: bool = False


def _key(source: str, filename: str) -> bytes:
    text = (
        filename.encode("utf-8", "surrogatepass") + b"\0" + source.encode("utf-8", "surrogatepass")
    )
    return hashlib.blake2b(text, digest_size=16).digest()


def _load(path: Path) -> dict[bytes, CodeType]:
    entries = read_marshal(path, "attrs code cache")
    if not isinstance(entries, dict) or not all(
        isinstance(k, bytes) and isinstance(v, CodeType) for k, v in entries.items()
    ):
        return {}
    return entries


def _attrs_make() -> ModuleType | None:
    """attr._make, if it compiles its scripts the way this cache expects."""
    try:
        import attr._make as make
    except ImportError:
        return None
    if "compile" in vars(make):  # someone else already wraps it
        return None
    if not callable(getattr(make, "_compile_and_eval", None)):
        return None
    return make


@contextlib.contextmanager
def attrs_code_cache(path: Path) -> Iterator[CacheStats]:
    """While the block runs, attrs takes its generated code from ``path`` where it can; on
    leaving, ``path`` is rewritten with what the block used if over ``REWRITE_SHARE`` of that
    missed or went unused."""
    stats = CacheStats()
    make = _attrs_make()
    if make is None:
        yield stats
        return
    # attrs compiles with the future features of its own module; so does the cache.
    flags = make._compile_and_eval.__code__.co_flags & FUTURE_FLAGS
    known = _load(path)
    used: dict[bytes, CodeType] = {}
    compile_ = builtins.compile

    def cached_compile(source: Any, filename: Any, mode: str, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs or mode != "exec" or type(source) is not str or type(filename) is not str:
            return compile_(source, filename, mode, *args, **kwargs)
        key = _key(source, filename)
        code = known.get(key)
        if code is None:
            code = compile_(source, filename, "exec", flags, True)
            stats.misses += 1
        else:
            stats.hits += 1
        used[key] = code
        return code

    make.compile = cached_compile  # type: ignore[attr-defined]
    try:
        yield stats
    finally:
        if vars(make).get("compile") is cached_compile:
            del make.compile
    # A few misses are normal (a frozen class's __hash__ source holds its name's hash, which
    # changes with every interpreter): the file is rewritten only when it is noticeably off.
    changed = stats.misses + len(known.keys() - used.keys())
    if used and changed > REWRITE_SHARE * len(used):
        stats.written = write_marshal(path, used, "attrs code cache")
    log.debug("attrs code cache: %d hits, %d compiled", stats.hits, stats.misses)


def default_path() -> Path:
    """The cache file in the data dir (``AGENT_LS_DATA_DIR``), one per bytecode version."""
    from agent_ls.dirs import data_dir

    return data_dir() / "cache" / f"attrs-code-{MAGIC_NUMBER.hex()}.marshal"
