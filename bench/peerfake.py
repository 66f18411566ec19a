"""A fake Anthropic API for comparing agents that send different requests (``bench/peers.py``).

``python -m bench.peerfake`` prints its base URL, then one JSON line per request:
``{"t": <CLOCK_MONOTONIC at arrival>, "main": <bool>, "turn": <int>, "bytes": <int>,
"path": ...}``. It is stateless, so each agent's side requests (titles, quota checks, token
counts) cannot shift its script: a request that offers tools is a turn of the agent loop and
gets the turn numbered by the assistant messages already in its history, from the script for
the tool set it offers (``read_file`` for agent-ls, ``Read`` for Claude Code); anything else
gets a one-word answer. The wire format is the fake API's (``tests.fakeapi``), unvalidated
(a peer may send fields the validator does not know).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from bench.stats import now

FILE = "calc.py"
OLD = "return a - b"
NEW = "return a + b"

# The task of every round: read a file, fix it, answer (three model turns).
SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "agent-ls": [
        {"tool_uses": [["read_file", {"file_path": FILE}]]},
        {"tool_uses": [["edit_file", {"file_path": FILE, "old_string": OLD, "new_string": NEW}]]},
        {"text": "Fixed: add() now adds."},
    ],
    "claude": [
        {"tool_uses": [["Read", {"file_path": "{root}/" + FILE}]]},
        {
            "tool_uses": [
                ["Edit", {"file_path": "{root}/" + FILE, "old_string": OLD, "new_string": NEW}]
            ]
        },
        {"text": "Fixed: add() now adds."},
    ],
}


def _tool_names(body: dict[str, Any]) -> set[str]:
    return {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}


def _workspace_root(body: dict[str, Any]) -> str:
    """Claude Code's tools want absolute paths: the root is in its system prompt."""
    system = body.get("system")
    text = json.dumps(system) if not isinstance(system, str) else system
    marker = "Primary working directory: "
    if marker in text:
        return text.split(marker, 1)[1].split("\\n", 1)[0].split("\n", 1)[0].strip()
    marker = "Working directory: "
    if marker in text:
        return text.split(marker, 1)[1].split("\\n", 1)[0].split("\n", 1)[0].strip()
    return "."


def choose(body: dict[str, Any]) -> tuple[bool, int, dict[str, Any]]:
    """(is a turn of the agent loop, its number, the scripted turn) for one request body."""
    names = _tool_names(body)
    script = (
        SCRIPTS["agent-ls"]
        if "read_file" in names
        else SCRIPTS["claude"]
        if "Read" in names and "Edit" in names
        else None
    )
    if script is None:
        return False, 0, {"text": "ok"}
    turn = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
    chosen = script[min(turn, len(script) - 1)]
    root = _workspace_root(body)
    return True, turn, json.loads(json.dumps(chosen).replace("{root}", root))


def serve() -> int:
    from tests.fakeapi.server import FakeAPI
    from tests.fakeapi.wire import RecordedRequest, response_from_json

    out_lock = threading.Lock()
    local = threading.local()

    class PeerAPI(FakeAPI):
        def _record(self, request: RecordedRequest) -> None:
            arrived = now()
            body = request.body if isinstance(request.body, dict) else {}
            main, turn, chosen = choose(body)
            local.response = response_from_json(chosen)
            size = len(json.dumps(request.body))
            line = {"t": arrived, "main": main, "turn": turn, "bytes": size, "path": request.path}
            with out_lock:
                sys.stdout.write(json.dumps(line) + "\n")
                sys.stdout.flush()

        def _next_response(self) -> Any:
            return local.response

    api = PeerAPI(validate=False)
    with api:
        print(api.url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
    return 0


if __name__ == "__main__":
    sys.exit(serve())
