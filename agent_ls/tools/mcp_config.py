"""MCP server configuration: the four sources, merged, expanded and checked.

One shape, Claude Code's: ``{"mcpServers": {NAME: {command, args?, env?, cwd?} |
{type: "http", url, headers?}}}``, ``disabled: true`` to skip, ``startupTimeoutMs`` /
``toolTimeoutMs`` per entry. Sources, lowest precedence first: the user's
``<config dir>/mcp.json``, the workspace's ``.mcp.json`` (project: runs only once trusted),
the ``mcpServers`` setting, and ACP's ``session/new.mcpServers``; a later source's entry
replaces an earlier one of the same name.

``${VAR}`` and ``${VAR:-default}`` expand in command, args, env, url and headers; an unset
``${VAR}`` without a default stays as written (as Claude Code does) and is reported. A bad
entry is reported by name and left out; it never stops the others.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

Source = Literal["user", "project", "settings", "acp"]
SOURCES: tuple[Source, ...] = ("user", "project", "settings", "acp")
PROJECT_FILE = ".mcp.json"
USER_FILE = "mcp.json"
DEFAULT_STARTUP_TIMEOUT_MS = 30_000
DEFAULT_TOOL_TIMEOUT_MS = 120_000

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One MCP server, expanded and checked."""

    name: str
    source: Source
    transport: Literal["stdio", "http"]
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    disabled: bool = False
    startup_timeout_ms: int = DEFAULT_STARTUP_TIMEOUT_MS
    tool_timeout_ms: int = DEFAULT_TOOL_TIMEOUT_MS

    def command_line(self) -> str:
        """What the trust dialog and ``agent.mcp`` show: the exact program and arguments."""
        if self.transport == "http":
            return self.url
        return shlex.join([self.command, *self.args])


@dataclass(slots=True)
class Loaded:
    """Servers read from one source, with the problems found in it."""

    servers: list[ServerConfig] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def expand(value: str, env: Mapping[str, str], unset: set[str] | None = None) -> str:
    """``${VAR}`` and ``${VAR:-default}``; bare ``$VAR`` is left alone."""

    def one(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found is not None and (found != "" or default is None):
            return found
        if default is not None:
            return default
        if unset is not None:
            unset.add(name)
        return match.group(0)

    return _VAR.sub(one, value)


def parse_servers(
    raw: Any,
    source: Source,
    *,
    env: Mapping[str, str] | None = None,
    startup_timeout_ms: int = DEFAULT_STARTUP_TIMEOUT_MS,
    tool_timeout_ms: int = DEFAULT_TOOL_TIMEOUT_MS,
    where: str = "",
) -> Loaded:
    """The servers of one ``{NAME: entry}`` object (the value of ``mcpServers``)."""
    env = os.environ if env is None else env
    where = where or source
    out = Loaded()
    if raw is None:
        return out
    if not isinstance(raw, dict):
        out.problems.append(f"{where}: mcpServers must be an object, got {type(raw).__name__}")
        return out
    for name, entry in raw.items():
        try:
            out.servers.append(
                _parse_entry(str(name), entry, source, env, startup_timeout_ms, tool_timeout_ms)
            )
        except _EntryError as exc:
            out.problems.append(f"{where}: MCP server {name!r}: {exc}")
        except _Unset as exc:
            out.problems.append(
                f"{where}: MCP server {name!r}: environment variable(s) not set: {exc}"
            )
    return out


class _EntryError(ValueError):
    pass


class _Unset(ValueError):
    pass


def _parse_entry(
    name: str,
    entry: Any,
    source: Source,
    env: Mapping[str, str],
    startup_default: int,
    tool_default: int,
) -> ServerConfig:
    if not name or not name.strip():
        raise _EntryError("the server needs a non-empty name")
    if not isinstance(entry, dict):
        raise _EntryError(f"the entry must be an object, got {type(entry).__name__}")
    kind = entry.get("type")
    if kind is None:
        kind = "http" if "url" in entry and "command" not in entry else "stdio"
    if kind == "streamable-http":
        kind = "http"
    if kind not in ("stdio", "http"):
        raise _EntryError(f"type must be 'stdio' or 'http', got {kind!r}")
    disabled = entry.get("disabled", False)
    if not isinstance(disabled, bool):
        raise _EntryError("disabled must be true or false")
    startup = _timeout(entry, "startupTimeoutMs", startup_default)
    tool = _timeout(entry, "toolTimeoutMs", tool_default)
    unset: set[str] = set()
    if kind == "stdio":
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise _EntryError("a stdio server needs a 'command' (a non-empty string)")
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise _EntryError("args must be a list of strings")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise _EntryError("cwd must be a string")
        config = ServerConfig(
            name=name,
            source=source,
            transport="stdio",
            command=expand(command, env, unset),
            args=tuple(expand(a, env, unset) for a in args),
            env=_string_map(entry, "env", env, unset),
            cwd=expand(cwd, env, unset) if cwd else None,
            disabled=disabled,
            startup_timeout_ms=startup,
            tool_timeout_ms=tool,
        )
    else:
        url = entry.get("url")
        if not isinstance(url, str) or not url.strip():
            raise _EntryError("an http server needs a 'url' (a non-empty string)")
        url = expand(url, env, unset)
        if not re.match(r"^https?://", url):
            raise _EntryError(f"url must start with http:// or https://, got {url!r}")
        config = ServerConfig(
            name=name,
            source=source,
            transport="http",
            url=url,
            headers=_string_map(entry, "headers", env, unset),
            disabled=disabled,
            startup_timeout_ms=startup,
            tool_timeout_ms=tool,
        )
    if unset and not disabled:
        raise _Unset(", ".join(sorted(unset)))
    return config


def _timeout(entry: dict[str, Any], key: str, default: int) -> int:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not 100 <= value <= 3_600_000:
        raise _EntryError(f"{key} must be a whole number of milliseconds (100 to 3600000)")
    return value


def _string_map(
    entry: dict[str, Any], key: str, env: Mapping[str, str], unset: set[str]
) -> dict[str, str]:
    value = entry.get(key, {})
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise _EntryError(f"{key} must be an object of strings")
    return {k: expand(v, env, unset) for k, v in value.items()}


def read_config_file(path: Path, source: Source, **kwargs: Any) -> tuple[Loaded, bytes | None]:
    """The servers of one ``{"mcpServers": ...}`` file, and its exact bytes (None if absent)."""
    try:
        content = path.read_bytes()
    except FileNotFoundError:
        return Loaded(), None
    except OSError as exc:
        return Loaded(problems=[f"{path}: cannot read it: {exc.strerror or exc}"]), None
    try:
        data = json.loads(content.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return Loaded(problems=[f"{path}: not valid JSON: {exc}"]), content
    if not isinstance(data, dict):
        return Loaded(problems=[f"{path}: must hold a JSON object"]), content
    servers = data.get("mcpServers")
    if servers is None:
        return Loaded(), content
    return parse_servers(servers, source, where=str(path), **kwargs), content


def acp_servers(raw: Any) -> Any:
    """ACP's ``session/new.mcpServers`` list (``env``/``headers`` as name-value pairs) as the
    ``{NAME: entry}`` object the other sources use."""
    if not isinstance(raw, list):
        return raw
    out: dict[str, Any] = {}
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            continue
        entry = {k: v for k, v in item.items() if k != "name"}
        for key in ("env", "headers"):
            pairs = entry.get(key)
            if isinstance(pairs, list):
                entry[key] = {
                    p["name"]: p["value"]
                    for p in pairs
                    if isinstance(p, dict) and isinstance(p.get("name"), str)
                }
        out[item["name"]] = entry
    return out


def merge(*sources: list[ServerConfig]) -> dict[str, ServerConfig]:
    """By name; a later list wins (the precedence order of :data:`SOURCES`)."""
    merged: dict[str, ServerConfig] = {}
    for servers in sources:
        for server in servers:
            merged.pop(server.name, None)  # a replaced entry moves to its new source's place
            merged[server.name] = server
    return merged


@dataclass(slots=True)
class ProjectFile:
    """A workspace's ``.mcp.json``: what the trust dialog shows and approval is tied to."""

    root: Path
    path: Path
    content: bytes
    loaded: Loaded


@dataclass(slots=True)
class Sources:
    """Every configured server, by source, before trust is decided."""

    user: Loaded = field(default_factory=Loaded)
    projects: list[ProjectFile] = field(default_factory=list)
    settings: Loaded = field(default_factory=Loaded)

    def empty(self) -> bool:
        return not (
            self.user.servers
            or self.settings.servers
            or any(p.loaded.servers for p in self.projects)
            or self.problems()
        )

    def problems(self) -> list[str]:
        found = [*self.user.problems, *self.settings.problems]
        for project in self.projects:
            found.extend(project.loaded.problems)
        return found


def load_sources(
    config_dir: Path, roots: list[Path], settings: Any, env: Mapping[str, str] | None = None
) -> Sources:
    """Read the user's file, each root's ``.mcp.json`` and the settings' ``mcpServers``.

    ``settings`` is the raw ``agent`` settings object; its top-level ``startupTimeoutMs`` /
    ``toolTimeoutMs`` are the defaults of every server.
    """
    raw = settings if isinstance(settings, dict) else {}
    startup = _default(raw, "startupTimeoutMs", DEFAULT_STARTUP_TIMEOUT_MS)
    tool = _default(raw, "toolTimeoutMs", DEFAULT_TOOL_TIMEOUT_MS)

    def read(path: Path, source: Source) -> tuple[Loaded, bytes | None]:
        return read_config_file(
            path, source, env=env, startup_timeout_ms=startup, tool_timeout_ms=tool
        )

    out = Sources()
    out.user, _ = read(config_dir / USER_FILE, "user")
    for root in roots:
        path = root / PROJECT_FILE
        loaded, content = read(path, "project")
        if content is not None:
            out.projects.append(ProjectFile(root, path, content, loaded))
    out.settings = parse_servers(
        raw.get("mcpServers"),
        "settings",
        env=env,
        startup_timeout_ms=startup,
        tool_timeout_ms=tool,
        where="setting mcpServers",
    )
    return out


def _default(raw: dict[str, Any], key: str, default: int) -> int:
    value = raw.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 3_600_000:
        return value
    return default
