"""A tool input model's JSON schema, kept from an earlier start.

The built-in tools' specs are part of the first request, and pydantic builds each input
model's validator when its class is made and its JSON schema when asked: ~6 ms of the
server's way to its first request, the same answer every time. The input models defer their
build (``defer_build``) to their first validation, a tool call, by when the request is on its
way, and :func:`input_schema` reads their schemas from a file in the data dir. An entry is
keyed by the model (module and name) and stamped with the identity (size, modification time)
of the file that defines it and pydantic's version: an edit or an upgrade computes it again.
An unreadable file is ignored and rewritten. Only for models whose fields are plain types
defined beside them (the stamp covers that one file).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

from pydantic import VERSION as PYDANTIC_VERSION
from pydantic import BaseModel

from agent_ls.codecache import read_marshal, write_marshal

WHAT = "tool schema cache"

_lock = threading.Lock()
_entries: dict[str, tuple[tuple[Any, ...], str]] | None = None  # key -> (stamp, schema JSON)
_path: Path | None = None


def default_path() -> Path:
    """The cache file in the data dir (``AGENT_LS_DATA_DIR``)."""
    from agent_ls.dirs import data_dir

    return data_dir() / "cache" / "tool-schemas.marshal"


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model.model_json_schema()``, from the cache when its stamp still holds (a new dict
    at each call: callers may keep or change it)."""
    key = f"{model.__module__}:{model.__qualname__}"
    stamp = _stamp(model)
    with _lock:
        entries = _load()
        found = entries.get(key)
        if stamp is not None and found is not None and found[0] == stamp:
            text = found[1]
        else:
            text = json.dumps(model.model_json_schema())
            if stamp is not None:
                entries[key] = (stamp, text)
                write_marshal(_path or default_path(), dict(entries), WHAT)
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _stamp(model: type[BaseModel]) -> tuple[Any, ...] | None:
    """What the schema depends on: pydantic's version and the defining file's identity."""
    source = getattr(sys.modules.get(model.__module__), "__file__", None)
    if not source:
        return None
    try:
        stat = os.stat(source)
    except OSError:
        return None
    return (PYDANTIC_VERSION, source, stat.st_size, stat.st_mtime_ns)


def _load() -> dict[str, tuple[tuple[Any, ...], str]]:
    global _entries, _path
    if _entries is None:
        _path = _path or default_path()
        stored = read_marshal(_path, WHAT)
        valid = isinstance(stored, dict) and all(
            isinstance(k, str)
            and isinstance(v, tuple)
            and len(v) == 2
            and isinstance(v[0], tuple)
            and isinstance(v[1], str)
            for k, v in stored.items()
        )
        _entries = stored if valid else {}
    return _entries


def use(path: Path | None) -> None:
    """Read and write the cache at ``path`` from now on (None: the data dir's); for tests."""
    global _entries, _path
    with _lock:
        _entries, _path = None, path
