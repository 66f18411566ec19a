"""User settings: ``initializationOptions`` / ``workspace/configuration`` section ``agent``.

Unknown keys are ignored and bad values are reported and replaced by defaults, so a typo in
an editor's settings never stops the server.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_ls import DEFAULT_MODEL
from agent_ls.dirs import data_dir as data_dir
from agent_ls.dirs import memory_file as memory_file
from agent_ls.dirs import user_config_dir as user_config_dir

Mode = Literal["default", "acceptEdits", "plan", "bypassPermissions"]
Effort = Literal["low", "medium", "high", "xhigh", "max"]
MODES: tuple[Mode, ...] = ("default", "acceptEdits", "plan", "bypassPermissions")


class PermissionRules(BaseModel):
    model_config = ConfigDict(extra="ignore")

    allow: list[str] = Field(default_factory=list)
    ask: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    model: str | None = None
    mode: Mode = "default"
    follow_agent: bool = Field(default=False, alias="followAgent")
    max_turns: int = Field(default=50, alias="maxTurns", ge=1, le=1000)
    subagent_max_turns: int = Field(default=30, alias="subagentMaxTurns", ge=1, le=1000)
    # A sub-agent running longer is stopped (like a cancel of that child alone); the parent
    # gets a "timed out" result with the child's text so far. At most a day.
    subagent_timeout_ms: int = Field(
        default=600_000, alias="subagentTimeoutMs", ge=100, le=86_400_000
    )
    # None: the model's default (8192; 32,000 for models that always think)
    max_tokens: int | None = Field(default=None, alias="maxTokens", ge=256, le=128_000)
    shell_timeout_ms: int = Field(default=120_000, alias="shellTimeoutMs", ge=1000, le=600_000)
    client_request_timeout: float = Field(default=5.0, alias="clientRequestTimeout", gt=0, le=600)
    edit_confirm_timeout: float = Field(default=600.0, alias="editConfirmTimeout", gt=0)
    permissions: PermissionRules = Field(default_factory=PermissionRules)
    compact_threshold: float = Field(default=0.85, alias="compactThreshold", gt=0.1, le=1.0)
    thinking_budget: int | None = Field(default=None, alias="thinkingBudget", ge=1024)
    effort: Effort | None = None  # None: the model's own default
    max_cost_usd: float | None = Field(default=None, alias="maxCostUsd", gt=0)
    # Shell commands in bubblewrap: "auto" when it works, "on" refuses commands without it.
    sandbox: Literal["auto", "on", "off"] = "auto"
    sandbox_network: bool = Field(default=False, alias="sandboxNetwork")
    # Extra or overriding prices: model-name prefix -> [input, output, cache read, cache write]
    # in USD per million tokens.
    prices: dict[str, list[float]] = Field(default_factory=dict)
    # Claude Code's shape: {EVENT: [{matcher?, hooks: [{type, command, timeout?}]}]}, checked
    # by agent.hooks (bad entries are reported there and skipped).
    hooks: dict[str, Any] = Field(default_factory=dict)
    # MCP servers ({NAME: {command, args?, env?, cwd?} | {type: "http", url, headers?}}) and
    # the default timeouts of every server; agent_ls.tools.mcp_config reads and checks them.
    mcp_servers: dict[str, Any] = Field(default_factory=dict, alias="mcpServers")
    startup_timeout_ms: int = Field(default=30_000, alias="startupTimeoutMs", ge=100, le=3_600_000)
    tool_timeout_ms: int = Field(default=120_000, alias="toolTimeoutMs", ge=100, le=3_600_000)

    def resolved_model(self) -> str:
        return self.model or os.environ.get("AGENT_LS_MODEL") or DEFAULT_MODEL


def parse_settings(raw: Any) -> tuple[Settings, list[str]]:
    """Settings from untrusted JSON; returns the settings and the problems found."""
    if raw is None:
        return Settings(), []
    if not isinstance(raw, dict):
        return Settings(), [f"agent settings must be an object, got {type(raw).__name__}"]
    try:
        return Settings.model_validate(raw), []
    except ValidationError as exc:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10]]
        bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        cleaned = {k: v for k, v in raw.items() if k not in bad}
        try:
            return Settings.model_validate(cleaned), problems
        except ValidationError:
            return Settings(), problems
