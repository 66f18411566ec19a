"""Paths judged as paths: malformed ones, secrets, and files that steer the agent or the shell.

Pure: it looks at names, never at contents, and imports nothing of agent_ls.
"""

from __future__ import annotations

import re
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
SENSITIVE_SUFFIXES = (
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".keystore",
    ".jks",
    ".asc",
    ".gpg",
    ".ppk",
    ".kdbx",
    ".p8",
)
_SECRET_NAMES = {
    "id_rsa": "a private SSH key",
    "id_ed25519": "a private SSH key",
    "id_ecdsa": "a private SSH key",
    "id_dsa": "a private SSH key",
    ".netrc": "the .netrc login store",
    "_netrc": "the .netrc login store",
    ".pypirc": "the PyPI credentials file (.pypirc)",
    ".npmrc": "the npm credentials file (.npmrc)",
    ".git-credentials": "git's stored credentials (.git-credentials)",
    ".pgpass": "the PostgreSQL password file (.pgpass)",
    ".my.cnf": "the MySQL client credentials (.my.cnf)",
    ".boto": "cloud credentials (.boto)",
    ".s3cfg": "S3 credentials (.s3cfg)",
    ".vault-token": "a Vault token",
    ".htpasswd": "a password file (.htpasswd)",
    "credentials.tfrc.json": "Terraform credentials",
    "secrets.yml": "a secrets file",
    "secrets.yaml": "a secrets file",
    "secrets.json": "a secrets file",
    "credentials": "a credentials file",
    "credentials.json": "a credentials file",
    "credentials.yml": "a credentials file",
    "credentials.yaml": "a credentials file",
    ".dockercfg": "Docker registry credentials (.dockercfg)",
    ".bash_history": "shell history (commands typed with passwords and tokens)",
    ".zsh_history": "shell history (commands typed with passwords and tokens)",
    ".python_history": "Python history",
    ".psql_history": "PostgreSQL history",
    ".mysql_history": "MySQL history",
}
_SECRET_PATTERNS = (
    (re.compile(r".*service[-_]?account.*\.json"), "a cloud service-account key"),
    (re.compile(r"client_secret.*\.json"), "an OAuth client secret"),
)
# Credential stores under the home directory: the store itself and everything in it.
CREDENTIAL_STORES = {
    ".ssh": "the SSH keys folder ~/.ssh",
    ".aws": "the AWS credentials folder ~/.aws",
    ".gnupg": "the GnuPG keyring ~/.gnupg",
    ".config/gh": "the GitHub CLI's tokens (~/.config/gh)",
    ".config/hub": "the hub CLI's tokens (~/.config/hub)",
    ".config/gcloud": "the Google Cloud credentials (~/.config/gcloud)",
    ".azure": "the Azure credentials (~/.azure)",
    ".kube": "the Kubernetes credentials (~/.kube)",
    ".docker/config.json": "the Docker registry credentials (~/.docker/config.json)",
    ".netrc": "the .netrc login store (~/.netrc)",
    ".npmrc": "the npm credentials file (~/.npmrc)",
    ".pypirc": "the PyPI credentials file (~/.pypirc)",
    ".cargo/credentials": "the Cargo registry token (~/.cargo/credentials)",
    ".cargo/credentials.toml": "the Cargo registry token (~/.cargo/credentials.toml)",
    ".gem/credentials": "the RubyGems credentials (~/.gem/credentials)",
    ".terraform.d": "the Terraform credentials (~/.terraform.d)",
    ".password-store": "the pass password store (~/.password-store)",
    ".local/share/keyrings": "the desktop keyring (~/.local/share/keyrings)",
    ".config/op": "the 1Password CLI's settings (~/.config/op)",
    ".mozilla": "browser profiles with saved passwords (~/.mozilla)",
    ".config/google-chrome": "browser profiles with saved passwords (~/.config/google-chrome)",
    ".config/chromium": "browser profiles with saved passwords (~/.config/chromium)",
    "Library/Keychains": "the macOS keychains (~/Library/Keychains)",
}
# Stores that are secrets wherever they sit (another user's home, a copied profile).
_STORE_PARTS = {tuple(k.lower().split("/")): v for k, v in CREDENTIAL_STORES.items()}
_SYSTEM_SECRETS = {
    ("etc", "shadow"): "the system password hashes (/etc/shadow)",
    ("etc", "gshadow"): "the system group password hashes (/etc/gshadow)",
    ("etc", "sudoers"): "the sudo rules (/etc/sudoers)",
    ("etc", "ssl", "private"): "the system's private TLS keys (/etc/ssl/private)",
}
# `.env.example` is a committed template, not a secret.
_ENV_TEMPLATES = (".example", ".sample", ".template")
# Other agents' and editors' configuration: a file there can start hooks or MCP servers later.
AGENT_CONFIG_DIRS = frozenset(
    {".claude", ".codex", ".gemini", ".cursor", ".vscode", ".idea", ".windsurf", ".continue"}
    | {".zed", ".devcontainer", ".roo"}
)
AGENT_CONFIG_FILES = frozenset(
    {".mcp.json", ".cursorrules", ".windsurfrules", ".clinerules", ".aider.conf.yml"}
)

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


def _contains(parts: tuple[str, ...], seq: tuple[str, ...]) -> bool:
    n = len(seq)
    return any(parts[k : k + n] == seq for k in range(len(parts) - n + 1))


def secret_kind(path: Path) -> str | None:
    """What secret ``path`` looks like ("the AWS credentials folder ~/.aws"), or None.

    Judged on the name and the folders above it: environment files (``.env*``, not
    ``.env.example``), private keys and certificates, credential files, and everything in a
    credential store (``~/.ssh``, ``~/.aws``, ``~/.config/gh``, ``~/.kube``, ...).
    """
    lower = path.name.lower()
    parts = tuple(p.lower() for p in path.parts)
    for seq, what in _SYSTEM_SECRETS.items():
        if parts[1 : 1 + len(seq)] == seq:
            return what
    for seq, what in _STORE_PARTS.items():
        if _contains(parts, seq):
            return what
    if lower.startswith(".env") and not lower.endswith(_ENV_TEMPLATES):
        return f"an environment file ({path.name})"
    if lower.endswith(SENSITIVE_SUFFIXES):
        return f"a key or certificate file ({path.name})"
    if lower in _SECRET_NAMES:
        return _SECRET_NAMES[lower]
    if re.fullmatch(r"id_[a-z0-9_-]+", lower):
        return f"a private key ({path.name})"
    for pattern, what in _SECRET_PATTERNS:
        if pattern.fullmatch(lower):
            return f"{what} ({path.name})"
    return None


def is_secret_like(path: Path) -> bool:
    """Files that look like secrets: never attached or read without the user's say-so."""
    return secret_kind(path) is not None


def holds_credential_stores(path: Path) -> bool:
    """A folder a recursive search from would reach the user's credential stores: ``/``,
    the home directory or a folder above it."""
    home = Path.home()
    return path == home or path in home.parents


def agent_config(path: Path) -> str | None:
    """The agent or editor configuration folder or file ``path`` is in, if any."""
    for part in path.parts:
        if part.lower() in AGENT_CONFIG_DIRS or part.lower() == ".agent-ls":
            return part
    return path.name if path.name.lower() in AGENT_CONFIG_FILES else None


def sensitive_reason(path: Path) -> str | None:
    """Why writing ``path`` deserves a question even when edits are otherwise accepted.

    Case-insensitive (``.GIT/config`` is ``.git/config`` on macOS and Windows file systems).
    """
    parts_lower = [p.lower() for p in path.parts]
    if ".git" in parts_lower:
        return "it is inside .git (repository internals: hooks and config run code)"
    secret = secret_kind(path)
    if secret:
        return f"it looks like a secret: {secret}"
    if path.name.lower() in _SENSITIVE_LOWER:
        return "it is a shell start-up, credentials or agent instructions file"
    if ".agent-ls" in parts_lower:
        return "it holds the agent's own settings (.agent-ls)"
    config = agent_config(path)
    if config:
        return (
            f"it is another agent's or editor's configuration ({config}): a file there can "
            "start hooks, tasks or MCP servers later"
        )
    return None
