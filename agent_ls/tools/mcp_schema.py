"""MCP tool names and input schemas made acceptable to both model APIs.

Names: ``mcp__<server>__<tool>``, characters outside ``[A-Za-z0-9_-]`` become ``_``, at most
64 characters (OpenAI's limit); a longer name keeps its head and ends in an 8-hex hash of the
full name, so two long names stay apart.

Schemas: ``$ref`` is inlined from ``$defs`` / ``definitions`` (a recursive one becomes an open
object), keys the APIs reject or that carry no meaning for the model are dropped, and the top
level is always ``{"type": "object", "properties": {...}}``.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

MAX_NAME = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
# Top-level combinators OpenAI refuses in function parameters.
_TOP_LEVEL_REJECTED = ("anyOf", "oneOf", "allOf", "not", "enum", "const")
_DROPPED = ("$schema", "$id", "$comment", "$anchor", "$dynamicRef", "$dynamicAnchor")
_MAX_DEPTH = 12


def sanitize(part: str) -> str:
    return _UNSAFE.sub("_", part) or "_"


def tool_name(server: str, tool: str) -> str:
    """The model-facing name of ``tool`` on ``server``."""
    full = f"mcp__{sanitize(server)}__{sanitize(tool)}"
    if len(full) <= MAX_NAME:
        return full
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
    return f"{full[: MAX_NAME - 9]}_{digest}"


def clean_schema(schema: Any) -> dict[str, Any]:
    """An input schema both providers accept, from whatever the server sent."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        found = schema.get(key)
        if isinstance(found, dict):
            defs.update({f"#/{key}/{name}": value for name, value in found.items()})
    cleaned = _clean(schema, defs, (), 0)
    if not isinstance(cleaned, dict):
        cleaned = {}
    for key in _TOP_LEVEL_REJECTED:
        cleaned.pop(key, None)
    cleaned["type"] = "object"
    properties = cleaned.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    cleaned["properties"] = properties
    required = cleaned.get("required")
    if isinstance(required, list):
        kept = [r for r in required if isinstance(r, str) and r in properties]
        if kept:
            cleaned["required"] = kept
        else:
            cleaned.pop("required")
    elif "required" in cleaned:
        cleaned.pop("required")
    return cleaned


def _clean(node: Any, defs: dict[str, Any], seen: tuple[str, ...], depth: int) -> Any:
    if depth > _MAX_DEPTH:
        return {}
    if isinstance(node, list):
        return [_clean(item, defs, seen, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = defs.get(ref)
        if target is None or ref in seen:
            # Unknown or recursive: an open object the model may fill as it sees fit.
            out: dict[str, Any] = {"type": "object"}
            if isinstance(node.get("description"), str):
                out["description"] = node["description"]
            return out
        merged = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
        return _clean(merged, defs, (*seen, ref), depth + 1)
    out = {}
    for key, value in node.items():
        if key in _DROPPED or key in ("$defs", "definitions"):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {
                str(name): _clean(sub, defs, seen, depth + 1) if isinstance(sub, dict) else {}
                for name, sub in value.items()
            }
        else:
            out[key] = _clean(value, defs, seen, depth + 1)
    return out
