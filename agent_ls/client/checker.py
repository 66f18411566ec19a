"""Diagnostics for the headless client, where no editor runs language servers.

A checker command (``agent-ls run --checker "ruff check --output-format=concise"``, off by
default) is run in the workspace and its ``path:line[:col]: message`` lines become the
diagnostics that ``agent/getDiagnostics`` answers with.
"""

from __future__ import annotations

import asyncio
import re
import shlex
from pathlib import Path
from typing import Any

from agent_ls.lsp.jsonrpc import path_to_uri

CHECKER_TIMEOUT = 60.0
_LINE = re.compile(
    r"^\s*(?P<path>[^:\n]+?):(?P<line>\d+)(?::(?P<col>\d+))?(?::|\s+-)?\s+(?P<message>\S.*)$"
)


def parse_output(output: str, root: Path) -> dict[str, list[dict[str, Any]]]:
    """Checker output → ``{uri: [Diagnostic]}`` (LSP positions: 0-based)."""
    found: dict[str, list[dict[str, Any]]] = {}
    for raw in output.splitlines():
        match = _LINE.match(raw)
        if not match:
            continue
        path = Path(match["path"].strip())
        if not path.is_absolute():
            path = root / path
        line = max(0, int(match["line"]) - 1)
        col = max(0, int(match["col"] or 1) - 1)
        message = match["message"].strip()
        lowered = message.lower()
        severity = 2 if lowered.startswith("warning") or " warning" in lowered[:20] else 1
        found.setdefault(path_to_uri(path.resolve()), []).append(
            {
                "range": {
                    "start": {"line": line, "character": col},
                    "end": {"line": line, "character": col},
                },
                "message": message,
                "severity": severity,
                "source": "checker",
            }
        )
    return found


async def run_checker(command: str, root: Path, uri: str | None) -> dict[str, Any]:
    """Run ``command`` (``{file}`` is replaced by the file asked about) and parse its output."""
    file_arg = ""
    if uri is not None and uri.startswith("file://"):
        from agent_ls.lsp.jsonrpc import uri_to_path

        path = uri_to_path(uri)
        file_arg = shlex.quote(str(path)) if path is not None else ""
    line = command.replace("{file}", file_arg)
    proc = await asyncio.create_subprocess_exec(
        "bash",
        "-c",
        line,
        cwd=str(root),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        output, _ = await asyncio.wait_for(proc.communicate(), CHECKER_TIMEOUT)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    by_uri = parse_output(output.decode("utf-8", "replace"), root)
    if uri is not None:
        by_uri = {uri: by_uri.get(uri, [])}
    return {"items": [{"uri": u, "diagnostics": d} for u, d in by_uri.items()]}
