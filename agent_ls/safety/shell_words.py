"""Shell words as bash expands them before a program sees them, for judging paths.

Only the expansions that can be known without running anything: quote removal (``$'...'``
decoded), ``~`` and ``~user``, ``$HOME`` / ``${HOME}``, variables the line itself set to known
values (``f=~/.ssh/id_rsa; cat $f``, ``for f in a b``), and brace expansion (``{a,b}``,
``{1..3}``). A word that needs anything else (another variable, a substitution) has no static
expansion (None).
Also the line continuations bash joins before it splits words.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping
from pathlib import Path

MAX_EXPANSIONS = 256
_HOME_VARS = ("HOME",)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# A character of a word: (text, special). Special characters take part in brace and tilde
# expansion; quoted, escaped and expanded ones never do.
Char = tuple[str, bool]


def home() -> str:
    return os.environ.get("HOME") or str(Path.home())


def _variable(raw: str, i: int, known: Mapping[str, str]) -> tuple[str | None, int] | None:
    """The value of the ``$NAME`` / ``${NAME}`` at ``raw[i]`` (a ``$``) and the index after it;
    None as the value when it is not known statically; None when it is a lone ``$``."""
    rest = raw[i + 1 :]
    if rest.startswith("{"):
        end = rest.find("}")
        name = rest[1:end] if end > 0 else ""
        if not _NAME.fullmatch(name):
            return None, len(raw)  # ${x:-y}, ${#x}, ${!x}: not static
        return _value(name, known), i + 2 + end
    m = _NAME.match(rest)
    if m:
        return _value(m.group(0), known), i + 1 + m.end()
    if rest[:1] and (rest[0].isdigit() or rest[0] in "@*#?$!-(`'\""):
        return None, len(raw)
    return None


def _value(name: str, known: Mapping[str, str]) -> str | None:
    if name in known:
        return known[name]
    return home() if name in _HOME_VARS else None


_ANSI = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}
_ANSI |= {"e": "\x1b", "E": "\x1b", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def _ansi_c(raw: str, i: int) -> tuple[str, int] | None:
    """Decode the ``$'...'`` starting at ``raw[i]``; the text and the index after it."""
    out: list[str] = []
    k = i + 2
    while k < len(raw):
        c = raw[k]
        if c == "'":
            return "".join(out), k + 1
        if c != "\\" or k + 1 >= len(raw):
            out.append(c)
            k += 1
            continue
        nxt = raw[k + 1]
        if nxt in _ANSI:
            out.append(_ANSI[nxt])
            k += 2
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            m = re.match(f"[0-9a-fA-F]{{1,{width}}}", raw[k + 2 :])
            if not m:
                return None
            out.append(chr(int(m.group(0), 16)))
            k += 2 + m.end()
        elif nxt in "01234567":
            m = re.match(r"[0-7]{1,3}", raw[k + 1 :])
            assert m is not None
            out.append(chr(int(m.group(0), 8) & 0xFF))
            k += 1 + m.end()
        else:
            return None  # \c and friends: not worth guessing
    return None


def _chars(raw: str, known: Mapping[str, str]) -> list[Char] | None:
    out: list[Char] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c == "\\":
            if i + 1 < n and raw[i + 1] != "\n":
                out.append((raw[i + 1], False))
            i += 2
        elif c == "'":
            end = raw.find("'", i + 1)
            if end < 0:
                return None
            out += [(ch, False) for ch in raw[i + 1 : end]]
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and raw[i] != '"':
                if raw[i] == "\\" and i + 1 < n and raw[i + 1] in '$`"\\\n':
                    if raw[i + 1] != "\n":
                        out.append((raw[i + 1], False))
                    i += 2
                elif raw[i] == "`":
                    return None
                elif raw[i] == "$":
                    var = _variable(raw, i, known)
                    if var is None:
                        out.append(("$", False))
                        i += 1
                        continue
                    value, i = var
                    if value is None:
                        return None
                    out += [(ch, False) for ch in value]
                else:
                    out.append((raw[i], False))
                    i += 1
            if i >= n:
                return None
            i += 1
        elif c == "`":
            return None
        elif c == "$":
            if raw[i + 1 : i + 2] == "'":
                decoded = _ansi_c(raw, i)
                if decoded is None:
                    return None
                out += [(ch, False) for ch in decoded[0]]
                i = decoded[1]
                continue
            if raw[i + 1 : i + 2] == '"':
                return None  # $"..." (locale translation)
            var = _variable(raw, i, known)
            if var is None:
                out.append(("$", False))
                i += 1
                continue
            value, i = var
            if value is None:
                return None
            out += [(ch, False) for ch in value]
        else:
            out.append((c, True))
            i += 1
    return out


def _close(chars: list[Char], start: int) -> tuple[int, list[int]] | None:
    """The matching ``}`` of the ``{`` at ``start`` and the top-level commas in between."""
    depth, commas = 0, list[int]()
    for k in range(start, len(chars)):
        ch, special = chars[k]
        if not special:
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return k, commas
        elif ch == "," and depth == 1:
            commas.append(k)
    return None


_SEQ = re.compile(r"^(-?\d+|[A-Za-z])\.\.(-?\d+|[A-Za-z])(?:\.\.(-?\d+))?$")


def _sequence(body: str) -> list[str] | None:
    m = _SEQ.match(body)
    if not m:
        return None
    a, b, step = m.group(1), m.group(2), abs(int(m.group(3) or 1)) or 1
    if a.lstrip("-").isdigit() != b.lstrip("-").isdigit():
        return None
    if a.lstrip("-").isdigit():
        lo, hi = int(a), int(b)
        rng = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
        return [str(x) for x in rng][:MAX_EXPANSIONS]
    lo, hi = ord(a), ord(b)
    rng = range(lo, hi + 1, step) if lo <= hi else range(lo, hi - 1, -step)
    return [chr(x) for x in rng][:MAX_EXPANSIONS]


def _braces(chars: list[Char]) -> list[list[Char]]:
    for start, (ch, special) in enumerate(chars):
        if not (special and ch == "{"):
            continue
        found = _close(chars, start)
        if found is None:
            continue
        end, commas = found
        inner = chars[start + 1 : end]
        pre, post = chars[:start], chars[end + 1 :]
        if commas:
            cuts = [start, *commas, end]
            options = [chars[cuts[k] + 1 : cuts[k + 1]] for k in range(len(cuts) - 1)]
        else:
            seq = _sequence("".join(c for c, _ in inner))
            if seq is None:
                continue
            options = [[(c, False) for c in item] for item in seq]
        out: list[list[Char]] = []
        for option in options:
            for tail in _braces(option + post):
                out.append(pre + tail)
                if len(out) >= MAX_EXPANSIONS:
                    return out
        return out
    return [chars]


def _tilde(chars: list[Char]) -> str:
    text = "".join(c for c, _ in chars)
    if not chars or chars[0] != ("~", True):
        return text
    slash = text.find("/")
    prefix = text if slash < 0 else text[:slash]
    if any(not special for _, special in chars[: len(prefix)]):
        return text  # ~"user": quoted, no expansion
    if prefix == "~":
        return home() + text[len(prefix) :]
    expanded = os.path.expanduser(prefix)
    return text if expanded == prefix else expanded + text[len(prefix) :]


def expand_word(
    raw: str, variables: Mapping[str, tuple[str, ...] | None] | None = None
) -> tuple[str, ...] | None:
    """The words bash makes of the source word ``raw`` before globbing, or None when that
    depends on something only known at run time. ``variables`` are the values the line gave
    (several when it may hold any of them; None when unknown)."""
    names = [n for n in _REFERENCED.findall(raw) if variables and n in variables]
    names = list(dict.fromkeys(names))
    choices: list[tuple[str, ...]] = []
    for name in names:
        values = (variables or {}).get(name)
        if values is None:
            return None
        choices.append(values)
    out: list[str] = []
    for combo in itertools.islice(itertools.product(*choices), MAX_EXPANSIONS):
        chars = _chars(raw, dict(zip(names, combo, strict=True)))
        if chars is None:
            return None
        out += [_tilde(w) for w in _braces(chars)]
    return tuple(dict.fromkeys(out))[:MAX_EXPANSIONS]


_REFERENCED = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


def assigned_value(
    raw: str, variables: Mapping[str, tuple[str, ...] | None]
) -> tuple[str, ...] | None:
    """What ``NAME=raw`` gives NAME: no brace expansion or splitting, ``~`` expanded at the
    start."""
    names = [n for n in _REFERENCED.findall(raw) if n in variables]
    if any(variables[n] is None for n in names):
        return None
    choices = [variables[n] or () for n in dict.fromkeys(names)]
    out: list[str] = []
    for combo in itertools.islice(itertools.product(*choices), MAX_EXPANSIONS):
        chars = _chars(raw, dict(zip(dict.fromkeys(names), combo, strict=True)))
        if chars is None:
            return None
        out.append(_tilde(chars))
    return tuple(dict.fromkeys(out))


def join_continuations(src: bytes, protected: list[tuple[int, int]]) -> bytes:
    """``src`` with every backslash-newline bash treats as a line continuation removed.

    ``protected`` are the byte ranges where bash keeps it (single quotes, ``$'...'``,
    comments, quoted here-documents).
    """
    out = bytearray()
    last = 0
    for m in re.finditer(rb"\\\n", src):
        i = m.start()
        run = 0
        while i - run - 1 >= 0 and src[i - run - 1] == 0x5C:
            run += 1
        if run % 2:
            continue  # an escaped backslash, then a newline
        if any(a <= i < b for a, b in protected):
            continue
        out += src[last:i]
        last = m.end()
    out += src[last:]
    return bytes(out)
