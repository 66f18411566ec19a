"""Who may do what: permission modes, rules from settings, and grants for this session.

Order of precedence: deny rules, then ask rules, then the mode, allow rules and session grants.

Shell rules are matched per parsed simple command, against its *command words* (name and
arguments, without redirections or leading ``VAR=value`` assignments), never against the raw
line: ``run_shell(npm test:*)`` matches ``CI=1 npm test -- -x``, and ``git status && rm -rf x``
never matches ``run_shell(git status*)``. Deny rules are also tried on the command behind
common wrappers (``sudo rm``, ``timeout 5 rm``, ``/bin/rm``), so a wrapper does not slip past
them.

Session grants are exact: ``run_shell(<command words>)`` or ``<tool>(<path>)``, matched by
equality, never as a pattern (a granted ``rm *.tmp`` does not allow ``rm a.tmp``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agent_ls.ports.editor import ConfirmRequest, Decision
from agent_ls.safety.rules import (
    WRITE_TOOLS,
    RuleMatch,
    RuleVerdict,
    command_words,
    compile_rules,
    unwrapped,
)
from agent_ls.settings import Mode, PermissionRules

if TYPE_CHECKING:
    from collections.abc import Sequence

    from agent_ls.ports.editor import EditorPort

# The PreToolUse hook that said "allow" for the tool call running in this task (None: none
# did). Set around each tool call by the loop, so a nested call (a sub-agent's) sets its own.
_HOOK_ALLOW: ContextVar[str | None] = ContextVar("agent_ls_hook_allow", default=None)


@contextlib.contextmanager
def hook_allowance(hook: str | None) -> Iterator[None]:
    """Within this block, questions are answered "Allow" on behalf of ``hook`` (if any)."""
    token = _HOOK_ALLOW.set(hook)
    try:
        yield
    finally:
        _HOOK_ALLOW.reset(token)


def allowed_by_hook() -> str | None:
    """The hook whose "allow" skips the questions of the running tool call, if any."""
    return _HOOK_ALLOW.get()


def mcp_rule_matches(rule: str, name: str) -> bool:
    """Does a permission rule name the MCP tool ``name``?"""
    rule = rule.strip()
    if not rule.startswith("mcp__") or not name.startswith("mcp__"):
        return False
    if rule in (name, "mcp__*"):
        return True
    if rule.endswith("__*"):
        return name.startswith(rule[:-1])
    server = name[len("mcp__") :].split("__", 1)[0]
    return rule == f"mcp__{server}"

@dataclass(slots=True)
class Permissions:
    """The permission state of one session."""

    mode: Mode = "default"
    rules: PermissionRules = field(default_factory=PermissionRules)
    grants: list[str] = field(default_factory=list)  # "run_shell(git push)" style, exact

    # -- shell -----------------------------------------------------------------------

    def shell_match(self, argv: Sequence[str]) -> RuleMatch | None:
        """The settings rule or session grant deciding one simple command, if any.

        Deny and ask rules are tried on the command words and on the command behind its
        wrappers; allow rules on the command words as written; grants by equality.
        """
        if not argv:
            return None
        words = command_words(argv)
        plain = " ".join(argv)
        candidates = {words, plain}
        for inner in unwrapped(argv):
            candidates |= {command_words(inner), " ".join(inner)}
        for kind, texts in (("deny", self.rules.deny), ("ask", self.rules.ask)):
            for rule in compile_rules(texts):
                if any(rule.matches_command(c) for c in candidates):
                    return RuleMatch(kind, rule.text)  # type: ignore[arg-type]
        if self.shell_grant_for(argv) in self.grants:
            return RuleMatch("allow", self.shell_grant_for(argv), grant=True, exact=True)
        for rule in compile_rules(self.rules.allow):
            if rule.matches_command(plain) or rule.matches_command(words):
                return RuleMatch("allow", rule.text, exact=rule.is_exact)
        return None

    def shell_rule(self, argv: Sequence[str]) -> RuleVerdict | None:
        match = self.shell_match(argv)
        return match.verdict if match else None

    def has_shell_deny_rules(self) -> bool:
        return any(r.tool == "run_shell" for r in compile_rules(self.rules.deny))

    @staticmethod
    def shell_grant_for(argv: Sequence[str]) -> str:
        """What "Allow for this session" remembers for one simple command."""
        return f"run_shell({command_words(argv)})"

    # -- paths -----------------------------------------------------------------------

    def path_match(self, tool: str, shown: str) -> RuleMatch | None:
        """The rule or grant deciding ``tool`` on ``shown`` (workspace-relative or absolute)."""
        for kind, texts in (("deny", self.rules.deny), ("ask", self.rules.ask)):
            for rule in compile_rules(texts):
                if rule.matches_path(tool, shown):
                    return RuleMatch(kind, rule.text)  # type: ignore[arg-type]
        tools = WRITE_TOOLS if tool in WRITE_TOOLS else {tool}
        for granted in sorted(tools):
            grant = self.path_grant_for(granted, shown)
            if grant in self.grants:
                return RuleMatch("allow", grant, grant=True, exact=True)
        for rule in compile_rules(self.rules.allow):
            if rule.matches_path(tool, shown):
                return RuleMatch("allow", rule.text, exact=rule.is_exact)
        return None

    def path_rule(self, tool: str, shown: str) -> RuleVerdict | None:
        match = self.path_match(tool, shown)
        return match.verdict if match else None

    @staticmethod
    def path_grant_for(tool: str, shown: str) -> str:
        return f"{tool}({shown})"

    # -- MCP tools -------------------------------------------------------------------

    def mcp_match(self, name: str) -> RuleMatch | None:
        """The rule or grant deciding the MCP tool ``name`` (``mcp__<server>__<tool>``).

        Rules name the tool (``mcp__github__create_issue``), every tool of a server
        (``mcp__github__*`` or ``mcp__github``) or every MCP tool (``mcp__*``); deny wins.
        """
        for kind, texts in (("deny", self.rules.deny), ("ask", self.rules.ask)):
            for text in texts:
                if mcp_rule_matches(text, name):
                    return RuleMatch(kind, text.strip())  # type: ignore[arg-type]
        if name in self.grants:
            return RuleMatch("allow", name, grant=True, exact=True)
        for text in self.rules.allow:
            if mcp_rule_matches(text, name):
                return RuleMatch("allow", text.strip(), exact=text.strip() == name)
        return None

    # -- grants and questions --------------------------------------------------------

    def grant(self, rule: str) -> None:
        if rule not in self.grants:
            self.grants.append(rule)

    def clear_grants(self) -> None:
        self.grants.clear()

    async def ask(
        self,
        port: EditorPort,
        message: str,
        grant: str | None,
        reasons: Sequence[str] = (),
        *,
        rule_asks: bool = False,
    ) -> bool:
        """Ask the user; remember ``grant`` when they allow it for the session.

        This is the one place a permission question is asked, after deny rules and classifier
        denies have had their say. A PreToolUse hook's "allow" answers it without asking
        (nothing is granted), except where an ask rule of the user asks (``rule_asks``).
        ``reasons`` are the question's reasons, one by one, for callers that record questions
        instead of asking them (``agent-ls check-command``).
        """
        if not rule_asks and allowed_by_hook() is not None:
            return True
        decision = await port.confirm(ConfirmRequest(message=message, grant=grant))
        if decision is Decision.ALLOW_SESSION and grant:
            self.grant(grant)
        return decision is not Decision.DENY
