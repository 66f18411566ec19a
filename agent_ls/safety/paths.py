"""Paths judged as paths: malformed ones, secrets, and files that steer the agent or the shell.

Pure: it looks at names, never at contents, and imports nothing of agent_ls.
"""

from __future__ import annotations

from pathlib import Path

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
