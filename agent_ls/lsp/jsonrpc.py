"""Small LSP helpers shared by the server and the headless client: URIs and plain JSON."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pygls.uris import from_fs_path, to_fs_path


def path_to_uri(path: Path) -> str:
    return from_fs_path(str(path)) or path.as_uri()


def uri_to_path(uri: str) -> Path | None:
    fs = to_fs_path(uri)
    return Path(fs) if fs else None


def plain_json(obj: Any) -> Any:
    """pygls hands unknown-method results over as namedtuples; make them plain JSON.

    Its namedtuples rename a key that is not an identifier to ``_<position>``; the only such key
    in the contract is ACP's ``_meta`` (sub-agents' ``parentToolCallId``), so it is restored.
    """
    if isinstance(obj, dict):
        return {k: plain_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple) and hasattr(obj, "_asdict"):
        return {
            ("_meta" if k == f"_{i}" else k): plain_json(v)
            for i, (k, v) in enumerate(obj._asdict().items())
        }
    if isinstance(obj, list | tuple):
        return [plain_json(v) for v in obj]
    return obj
