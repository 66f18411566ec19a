"""MCP servers for the language server: read the config after ``initialized``, ask trust
for the workspace's ``.mcp.json``, start the servers in the background, report them.

Nothing here runs before ``initialized``, and with no MCP config nothing of the ``mcp`` SDK
(nor :mod:`agent_ls.tools.mcp`) is ever imported.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import logging
from typing import TYPE_CHECKING, Any

# ``ls`` is the AgentServer (not imported: lsp.server imports this module).
AgentServer = Any

if TYPE_CHECKING:
    from agent_ls.tools.mcp import McpManager
    from agent_ls.tools.mcp_config import ProjectFile, ServerConfig, Sources

log = logging.getLogger(__name__)


def _load(ls: AgentServer) -> Sources:
    from agent_ls.settings import user_config_dir
    from agent_ls.tools.mcp_config import load_sources

    return load_sources(user_config_dir(), ls.roots(), ls.init_options)


def _new_manager(ls: AgentServer) -> McpManager:
    from agent_ls.tools.mcp import McpManager

    manager = McpManager(cwd=ls.roots()[0])
    ls.service.exit_hooks.append(manager.kill_all)  # `exit` leaves at once (os._exit)
    atexit.register(manager.kill_all)  # the editor went away without shutdown or exit
    return manager


async def start_mcp(ls: AgentServer) -> None:
    """Start the configured MCP servers; project ones only once their file is trusted."""
    configured = ls.service.mcp_configured = asyncio.Event()
    try:
        sources = await asyncio.to_thread(_load, ls)
        if sources.empty():
            return
        await asyncio.to_thread(importlib.import_module, "agent_ls.tools.mcp")
        manager = ls.service.mcp or _new_manager(ls)
        ls.service.mcp = manager
        await start_sources(ls, manager, sources, configured)
    except Exception:
        log.exception("starting MCP servers failed")
    finally:
        configured.set()


async def start_sources(
    ls: AgentServer, manager: McpManager, sources: Sources, configured: asyncio.Event
) -> None:
    from agent_ls.tools.mcp_config import merge

    manager.problems.extend(sources.problems())
    for problem in sources.problems():
        _warn(ls, f"agent-ls MCP: {problem}")
    projects = [s for p in sources.projects for s in p.loaded.servers]
    merged = merge(sources.user.servers, projects, sources.settings.servers)
    waiting: dict[str, ServerConfig] = {}
    for config in merged.values():
        if config.source == "project" and not config.disabled:
            manager.add(config, state="approval", start=False)
            waiting[config.name] = config
        else:
            manager.add(config)
    configured.set()  # agent.mcp and the first ask see every server from here on
    for project in sources.projects:
        names = [c.name for c in project.loaded.servers if c.name in waiting]
        if names:
            await _ask_trust(ls, manager, project, [waiting[n] for n in names])


async def _ask_trust(
    ls: AgentServer, manager: McpManager, project: ProjectFile, configs: list[ServerConfig]
) -> None:
    from agent_ls.lsp.port import LspEditorPort
    from agent_ls.safety.trust import TrustRequest, TrustStore, ensure_trusted

    await asyncio.to_thread(importlib.import_module, "agent_ls.settings")
    request = TrustRequest(
        root=project.root,
        file=project.path,
        content=project.content,
        kind="MCP servers",
        items=tuple(f"{c.name}: {c.command_line()}" for c in configs),
    )
    port = LspEditorPort(ls, "", None)  # not tied to any run
    approved = await ensure_trusted(port, TrustStore.default(), request)
    for config in configs:
        if approved:
            manager.start(config.name)
        else:
            manager.set_state(
                config.name, "denied", f"{project.path.name} was not approved in this workspace"
            )


async def status(ls: AgentServer) -> dict[str, Any]:
    configured = ls.service.mcp_configured
    if configured is not None and not configured.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(configured.wait(), 10)
    manager = ls.service.mcp
    if manager is None:
        return {"servers": []}
    out: dict[str, Any] = {"servers": manager.status()}
    if manager.problems:
        out["problems"] = list(manager.problems)
    return out


def _warn(ls: AgentServer, message: str) -> None:
    from lsprotocol import types

    ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))
