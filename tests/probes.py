"""Running a probe script in a fresh interpreter and reading the JSON it prints last.

Caches and import hooks change a whole process: their tests compare what a probe process
sees with the cache and without it, each from the outside.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.util import MAGIC_NUMBER

# Source for a probe: a code object described canonically (marshal's bytes also depend on
# reference counts and interning; this does not).
CANON = r"""
from types import CodeType
def canon(code):
    consts = tuple(canon(c) if isinstance(c, CodeType) else repr(c) for c in code.co_consts)
    return (code.co_code, code.co_flags, code.co_names, code.co_varnames, code.co_freevars,
            code.co_cellvars, code.co_filename, code.co_qualname, code.co_firstlineno,
            code.co_linetable, code.co_exceptiontable, code.co_argcount,
            code.co_posonlyargcount, code.co_kwonlyargcount, code.co_stacksize, consts)
"""

# Cache files a reader must ignore (and its writer replace).
UNREADABLE = {
    "empty": b"",
    "garbage": b"garbage",
    "cut": MAGIC_NUMBER + b"\xff\x00 not marshal",
    "another-python": b"\x00\x00\r\n" + b"x" * 64,
}


def run_json(
    code: str, *args: str, env: dict[str, str] | None = None, path: list[str] | None = None
) -> dict[str, object]:
    """What ``python -c code args…`` printed last, as JSON (it must exit 0)."""
    full = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    if path:
        full["PYTHONPATH"] = os.pathsep.join([*path, full.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=full
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result
