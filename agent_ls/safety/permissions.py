"""Who may do what: permission modes, rules from settings, and grants for this session.

Order of precedence: deny rules, then ask rules, then the mode and allow rules and session
grants. Shell rules are matched per parsed simple command, never against the raw line, so
``git status && rm -rf x`` never matches ``run_shell(git status*)``.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agent_ls.agent.port import ConfirmRequest, Decision
from agent_ls.settings import Mode, PermissionRules

if TYPE_CHECKING:
    from agent_ls.agent.port import EditorPort
    from agent_ls.safety.shell import SimpleCommand

RuleVerdict = Literal["allow", "ask", "deny"]

_RULE = re.compile(r"^\s*([a-z_]+)\s*(?:\((.*)\))?\s*$", re.S)

SENSITIVE_NAMES = {
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
    ".config/fish/config.fish",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "id_dsa",
    "authorized_keys",
    "known_hosts",
    "AGENTS.md",
    "CLAUDE.md",
    "AGENTS.local.md",
    "CLAUDE.local.md",
}
SENSITIVE_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".keystore", ".jks", ".asc", ".gpg")


def is_secret_like(path: Path) -> bool:
    """Files that look like secrets: never attached or read without the user's say-so."""
    name = path.name
    lower = name.lower()
    return (
        lower.startswith(".env")
        or lower.endswith(SENSITIVE_SUFFIXES)
        or lower in {"id_rsa", "id_ed25519", "id_ecdsa", "id_dsa", ".netrc", ".pypirc", ".npmrc"}
        or ".ssh" in {p.lower() for p in path.parts}
    )


def sensitive_reason(path: Path) -> str | None:
    """Why writing ``path`` deserves a question even when edits are otherwise accepted."""
    parts_lower = [p.lower() for p in path.parts]
    if ".git" in parts_lower:
        return "it is inside .git (repository internals)"
    if is_secret_like(path):
        return "it looks like a secret (environment file or key)"
    if path.name in SENSITIVE_NAMES or path.name.lower() in {n.lower() for n in SENSITIVE_NAMES}:
        return "it is a shell start-up, credential or agent instructions file"
    if ".agent-ls" in parts_lower or (".vscode" in parts_lower and path.name == "settings.json"):
        return "it holds the agent's own settings"
    return None


@dataclass(slots=True)
class Rule:
    tool: str
    pattern: str | None

    @classmethod
    def parse(cls, text: str) -> Rule | None:
        match = _RULE.match(text)
        if not match:
            return None
        return cls(match.group(1), match.group(2))

    def matches_command(self, command: str) -> bool:
        if self.tool != "run_shell":
            return False
        if self.pattern is None:
            return True
        pattern = self.pattern.strip()
        if pattern.endswith(":*"):
            prefix = pattern[:-2].strip()
            return command == prefix or command.startswith(prefix + " ")
        return fnmatch.fnmatchcase(command, pattern)

    def matches_path(self, tool: str, rel_path: str) -> bool:
        if self.tool != tool:
            return False
        if self.pattern is None:
            return True
        pattern = self.pattern.strip()
        if pattern.endswith("/**"):
            base = pattern[:-3]
            return rel_path == base or rel_path.startswith(base + "/")
        return fnmatch.fnmatchcase(rel_path, pattern) or fnmatch.fnmatchcase(
            rel_path.split("/")[-1], pattern
        )


def _compile(rules: list[str]) -> list[Rule]:
    return [r for r in (Rule.parse(t) for t in rules) if r is not None]


@dataclass(slots=True)
class Permissions:
    """The permission state of one session."""

    mode: Mode = "default"
    rules: PermissionRules = field(default_factory=PermissionRules)
    grants: list[str] = field(default_factory=list)  # "run_shell(git push)" style

    def shell_rule(self, command: str) -> RuleVerdict | None:
        """The verdict of settings rules (and session grants) for one simple command."""
        for kind, texts in (("deny", self.rules.deny), ("ask", self.rules.ask)):
            if any(r.matches_command(command) for r in _compile(texts)):
                return kind  # type: ignore[return-value]
        if any(r.matches_command(command) for r in _compile(self.rules.allow + self.grants)):
            return "allow"
        return None

    def path_rule(self, tool: str, rel_path: str) -> RuleVerdict | None:
        for kind, texts in (
            ("deny", self.rules.deny),
            ("ask", self.rules.ask),
            ("allow", self.rules.allow + self.grants),
        ):
            if any(r.matches_path(tool, rel_path) for r in _compile(texts)):
                return kind  # type: ignore[return-value]
        return None

    def grant(self, rule: str) -> None:
        if rule not in self.grants:
            self.grants.append(rule)

    def clear_grants(self) -> None:
        self.grants.clear()

    async def ask(self, port: EditorPort, message: str, grant: str | None) -> bool:
        """Ask the user; remember ``grant`` when they allow it for the session."""
        decision = await port.confirm(ConfirmRequest(message=message, grant=grant))
        if decision is Decision.ALLOW_SESSION and grant:
            self.grant(grant)
        return decision is not Decision.DENY

    def shell_grant_for(self, command: SimpleCommand) -> str:
        return f"run_shell({command.text})"
