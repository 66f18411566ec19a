"""What ``agent-ls acp`` answers to ``initialize``, as plain JSON (no ``acp`` import needed)."""

from __future__ import annotations

from typing import Any

from agent_ls import __version__

PROTOCOL_VERSION = 1


def initialize_result() -> dict[str, Any]:
    """The ``initialize`` result: protocol version 1, what the agent offers, who it is."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": False},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}},
        },
        "authMethods": [],
        "agentInfo": {"name": "agent-ls", "title": "agent-ls", "version": __version__},
    }
