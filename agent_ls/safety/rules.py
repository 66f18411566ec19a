"""Permission rules and the command words they match.

Shell rules are matched per parsed simple command, against its *command words* (name and
arguments, without redirections or leading ``VAR=value`` assignments), never against the raw
line. Deny rules are also tried on the command behind common wrappers (``sudo rm``,
``timeout 5 rm``, ``/bin/rm``), so a wrapper does not slip past them.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

RuleVerdict = Literal["allow", "ask", "deny"]

_RULE = re.compile(r"^\s*([a-z_]+)\s*(?:\((.*)\))?\s*$", re.S)


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


WRITE_TOOLS = frozenset({"write_file", "edit_file"})


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
        return self.tool == tool or (self.tool in WRITE_TOOLS and tool in WRITE_TOOLS)

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


def compile_rules(rules: list[str]) -> list[Rule]:
    return [r for r in (Rule.parse(t) for t in rules) if r is not None]
