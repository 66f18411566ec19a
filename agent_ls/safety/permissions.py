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

import fnmatch
import os
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from agent_ls.agent.port import ConfirmRequest, Decision
from agent_ls.settings import Mode, PermissionRules

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from agent_ls.agent.port import EditorPort

RuleVerdict = Literal["allow", "ask", "deny"]

_RULE = re.compile(r"^\s*([a-z_]+)\s*(?:\((.*)\))?\s*$", re.S)

SENSITIVE_NAMES = {
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".zlogout",
    ".cshrc",
    ".tcshrc",
    ".kshrc",
    ".inputrc",
    "config.fish",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".gitconfig",
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
_SENSITIVE_LOWER = {n.lower() for n in SENSITIVE_NAMES}
SENSITIVE_SUFFIXES = (".pem", ".key", ".p12", ".pfx", ".keystore", ".jks", ".asc", ".gpg")
_SECRET_NAMES = {
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "id_dsa",
    ".netrc",
    ".pypirc",
    ".npmrc",
    ".git-credentials",
}

MAX_PATH_CHARS = 4096  # PATH_MAX on Linux: a longer path cannot be opened anyway
# Characters that make a path lie about itself in a dialog: direction overrides and
# invisible joiners (Trojan Source), besides the control characters.
_DECEPTIVE = {
    *(chr(c) for c in range(0x202A, 0x202F)),
    *(chr(c) for c in range(0x2066, 0x206A)),
    "\u200b",
    "\u200c",
    "\u200d",
    "\u200e",
    "\u200f",
    "\u2028",
    "\u2029",
    "\ufeff",
}


def path_problem(text: str) -> str | None:
    """Why ``text`` is not a usable path (NUL, empty, over-long, control characters), or None.

    The answer completes "the path ...", e.g. "contains a NUL byte".
    """
    if "\0" in text:
        return "contains a NUL byte"
    if not text.strip():
        return "is empty"
    if len(text) > MAX_PATH_CHARS:
        return f"is too long ({len(text):,} characters; the limit is {MAX_PATH_CHARS:,})"
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code < 0xA0:
            return f"contains a control character ({ch!r})"
        if ch in _DECEPTIVE:
            return f"contains an invisible or direction-changing character (U+{code:04X})"
        if 0xD800 <= code < 0xE000:
            return "is not valid text (it holds an unpaired surrogate)"
    return None


def is_secret_like(path: Path) -> bool:
    """Files that look like secrets: never attached or read without the user's say-so."""
    lower = path.name.lower()
    return (
        lower.startswith(".env")
        or lower.endswith(SENSITIVE_SUFFIXES)
        or lower in _SECRET_NAMES
        or ".ssh" in {p.lower() for p in path.parts}
        or ".gnupg" in {p.lower() for p in path.parts}
    )


def sensitive_reason(path: Path) -> str | None:
    """Why writing ``path`` deserves a question even when edits are otherwise accepted.

    Case-insensitive (``.GIT/config`` is ``.git/config`` on macOS and Windows file systems).
    """
    parts_lower = [p.lower() for p in path.parts]
    if ".git" in parts_lower:
        return "it is inside .git (repository internals: hooks and config run code)"
    if is_secret_like(path):
        return "it looks like a secret (environment file, key or credentials)"
    if path.name.lower() in _SENSITIVE_LOWER:
        return "it is a shell start-up, credentials or agent instructions file"
    if ".agent-ls" in parts_lower or (".vscode" in parts_lower and path.name == "settings.json"):
        return "it holds the agent's own settings"
    return None


# --------------------------------------------------------------------------- shell words


_PLAIN_WORD = re.compile(r"[^\s'\"\\]+")
_AS_WRITTEN = re.compile(r"[$`]|^['\"]")  # the parser could not resolve it: shown as written


def command_words(argv: Sequence[str]) -> str:
    """The command words as shown in dialogs and matched by rules: ``npm test -- -x``.

    An argument holding spaces or quotes is quoted, so ``rm "a b"`` (one file) and ``rm a b``
    (two files) never read the same; one with an expansion (``"$DIR"``) is shown as written.
    """
    return " ".join(
        a if _PLAIN_WORD.fullmatch(a) or _AS_WRITTEN.search(a) else shlex.quote(a) for a in argv
    )


# Wrappers that run the command given in their arguments, with the options taking a value.
_WRAPPERS: dict[str, frozenset[str]] = {
    "sudo": frozenset(
        ["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "--user", "--group"]
    ),
    "doas": frozenset({"-u", "-C"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-t", "--class", "--classdata"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o", "--format", "--output"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "stdbuf": frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}),
    "xargs": frozenset(
        [
            "-I",
            "-n",
            "-P",
            "-d",
            "-a",
            "-L",
            "-s",
            "-E",
            "-e",
            "--max-args",
            "--max-procs",
            "--delimiter",
        ]
    ),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "chronic": frozenset(),
    "unbuffer": frozenset(),
    "watch": frozenset({"-n", "-d", "--interval"}),
    "caffeinate": frozenset({"-t", "-w"}),
    "taskset": frozenset(),
    "setsid": frozenset(),
    "flock": frozenset({"-w", "-E", "--timeout"}),
}


def unwrapped(argv: Sequence[str]) -> Iterator[tuple[str, ...]]:
    """``argv`` and the commands behind its wrappers: ``sudo -u x /bin/rm -rf y`` gives
    ``rm -rf y`` too. Best effort, for deny and ask rules only (never to allow more)."""
    current = tuple(argv)
    for _ in range(8):
        if not current:
            return
        yield current
        name = current[0].rpartition("/")[2]
        if name != current[0]:
            current = (name, *current[1:])
            continue
        takes = _WRAPPERS.get(name)
        if takes is None or (name == "command" and {"-v", "-V"} & set(current)):
            return  # not a wrapper, or `command -v x`, which only looks x up
        i = 1
        while i < len(current) and current[i].startswith("-") and current[i] != "-":
            if current[i] == "--":
                i += 1
                break
            i += 2 if current[i] in takes else 1
        if name == "env":
            while i < len(current) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", current[i]):
                i += 1
        elif name == "timeout" and i < len(current):
            i += 1  # the duration
        elif name == "flock" and i < len(current):
            i += 1  # the lock file
        elif name == "taskset" and i < len(current):
            i += 1  # the cpu mask
        current = current[i:]


# --------------------------------------------------------------------------- rules


_WRITE_TOOLS = frozenset({"write_file", "edit_file"})


@dataclass(slots=True)
class Rule:
    tool: str
    pattern: str | None
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> Rule | None:
        match = _RULE.match(text)
        if not match:
            return None
        return cls(match.group(1), match.group(2), text.strip())

    def matches_command(self, words: str) -> bool:
        """Does this rule cover one simple command given as its command words?"""
        if self.tool != "run_shell":
            return False
        if self.pattern is None or self.pattern.strip() in ("", "*"):
            return True
        pattern = self.pattern.strip()
        if pattern.endswith(":*"):
            prefix = pattern[:-2].strip()
            return words == prefix or words.startswith(prefix + " ")
        return fnmatch.fnmatchcase(words, pattern)

    def applies_to_tool(self, tool: str) -> bool:
        # A rule about editing a file covers every tool that writes it.
        return self.tool == tool or (self.tool in _WRITE_TOOLS and tool in _WRITE_TOOLS)

    def matches_path(self, tool: str, rel_path: str) -> bool:
        if not self.applies_to_tool(tool):
            return False
        if self.pattern is None or self.pattern.strip() in ("", "**"):
            return True
        pattern = os.path.expanduser(self.pattern.strip())
        if pattern.endswith("/**"):
            base = pattern[:-3]
            return rel_path == base or rel_path.startswith(base + "/")
        return fnmatch.fnmatchcase(rel_path, pattern) or fnmatch.fnmatchcase(
            rel_path.split("/")[-1], pattern
        )

    @property
    def is_exact(self) -> bool:
        """A rule naming one thing, with no wildcard."""
        return self.pattern is not None and not re.search(r"[*?\[]", self.pattern)


@dataclass(frozen=True, slots=True)
class RuleMatch:
    verdict: RuleVerdict
    rule: str  # the rule's text as the user wrote it, or the grant
    grant: bool = False  # a session grant (always exact)
    exact: bool = False  # names exactly this path or command


def _compile(rules: list[str]) -> list[Rule]:
    return [r for r in (Rule.parse(t) for t in rules) if r is not None]


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
            for rule in _compile(texts):
                if any(rule.matches_command(c) for c in candidates):
                    return RuleMatch(kind, rule.text)  # type: ignore[arg-type]
        if self.shell_grant_for(argv) in self.grants:
            return RuleMatch("allow", self.shell_grant_for(argv), grant=True, exact=True)
        for rule in _compile(self.rules.allow):
            if rule.matches_command(plain) or rule.matches_command(words):
                return RuleMatch("allow", rule.text, exact=rule.is_exact)
        return None

    def shell_rule(self, argv: Sequence[str]) -> RuleVerdict | None:
        match = self.shell_match(argv)
        return match.verdict if match else None

    def has_shell_deny_rules(self) -> bool:
        return any(r.tool == "run_shell" for r in _compile(self.rules.deny))

    @staticmethod
    def shell_grant_for(argv: Sequence[str]) -> str:
        """What "Allow for this session" remembers for one simple command."""
        return f"run_shell({command_words(argv)})"

    # -- paths -----------------------------------------------------------------------

    def path_match(self, tool: str, shown: str) -> RuleMatch | None:
        """The rule or grant deciding ``tool`` on ``shown`` (workspace-relative or absolute)."""
        for kind, texts in (("deny", self.rules.deny), ("ask", self.rules.ask)):
            for rule in _compile(texts):
                if rule.matches_path(tool, shown):
                    return RuleMatch(kind, rule.text)  # type: ignore[arg-type]
        tools = _WRITE_TOOLS if tool in _WRITE_TOOLS else {tool}
        for granted in sorted(tools):
            grant = self.path_grant_for(granted, shown)
            if grant in self.grants:
                return RuleMatch("allow", grant, grant=True, exact=True)
        for rule in _compile(self.rules.allow):
            if rule.matches_path(tool, shown):
                return RuleMatch("allow", rule.text, exact=rule.is_exact)
        return None

    def path_rule(self, tool: str, shown: str) -> RuleVerdict | None:
        match = self.path_match(tool, shown)
        return match.verdict if match else None

    @staticmethod
    def path_grant_for(tool: str, shown: str) -> str:
        return f"{tool}({shown})"

    # -- grants and questions --------------------------------------------------------

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
