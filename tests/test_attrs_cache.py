"""attrs' generated code for lsprotocol's classes, from the code cache (``cover_attrs``).

Checked against attrs itself: a process that imports lsprotocol without the cache compiles
every class's methods; a process served from a warm cache must end up with the same code,
byte for byte, and the same classes behaving the same.
"""

from __future__ import annotations

import marshal
import os
import types
from importlib.util import MAGIC_NUMBER
from pathlib import Path

import pytest

from tests.probes import CANON, run_json

# Every attrs class of lsprotocol.types: each generated method's code, hashed.
PROBE = CANON + r"""
import hashlib, json, sys
from pathlib import Path
stats = None
if sys.argv[1] == "cache":
    from agent_ls import codecache
    from agent_ls.lsp.attrs_replay import cover_attrs
    stats = codecache.install(Path(sys.argv[2]))
    assert cover_attrs()
import lsprotocol.types as types
import attrs

counts = None if stats is None else [stats.hits, stats.misses]
digests = {}
for name, cls in sorted(vars(types).items()):
    if isinstance(cls, type) and attrs.has(cls):
        for method in ("__init__", "__eq__", "__ne__", "__repr__", "__hash__", "__setattr__",
                       "__getstate__", "__setstate__", "__lt__"):
            code = getattr(vars(cls).get(method), "__code__", None)
            if code is not None:
                digests[f"{name}.{method}"] = hashlib.sha256(repr(canon(code)).encode()).hexdigest()
pos = types.Position(line=1, character=2)
behaviour = [repr(pos), pos == types.Position(line=1, character=2), pos == types.Position(1, 3)]
try:
    types.Position(line=-1, character=2)
    behaviour.append("accepted a negative line")
except (TypeError, ValueError) as exc:
    behaviour.append(type(exc).__name__)
if stats is not None:
    codecache.save()
print(json.dumps({
    "digests": digests,
    "behaviour": behaviour,
    "stats": None if stats is None else [*counts, stats.written],
}))
"""


def probe(*args: str) -> dict[str, object]:
    return run_json(PROBE, *args)


@pytest.fixture(scope="module")
def plain() -> dict[str, object]:
    return probe("plain")


def test_a_warm_cache_gives_attrs_the_code_it_would_compile(
    tmp_path: Path, plain: dict[str, object]
) -> None:
    path = tmp_path / "cache" / "code.marshal"
    first = probe("cache", str(path))
    hits, misses, written = first["stats"]  # type: ignore[misc]
    assert misses > 500 and written == 1  # lsprotocol has ~560 attrs classes
    second = probe("cache", str(path))
    hits_then, misses_then, written_then = second["stats"]  # type: ignore[misc]
    assert hits_then >= hits + misses - 1  # all but (at most) the one frozen class's hash
    assert misses_then <= 1 and written_then == 0
    assert len(plain["digests"]) > 1000  # type: ignore[arg-type]
    for run in (first, second):
        assert run["digests"] == plain["digests"]
        assert run["behaviour"] == plain["behaviour"]
    assert plain["behaviour"][1] is True and plain["behaviour"][2] is False  # type: ignore[index]


def test_the_server_keeps_its_caches_in_the_data_dir_and_a_later_start_rewrites_none(
    workspace: Path, tmp_path: Path
) -> None:
    from tests.rawclient import RawClient

    data = tmp_path / "data"
    seen: list[dict[str, tuple[int, int]]] = []
    for _ in range(3):  # a first start writes them; later ones start from them
        server = RawClient(workspace, env={"AGENT_LS_DATA_DIR": str(data)})
        try:
            params = {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {}}
            assert "result" in server.request("initialize", params)
        finally:
            server.close()
        files = sorted((data / "cache").glob("*.marshal"))
        seen.append({p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in files})
    magic = MAGIC_NUMBER.hex()
    assert sorted(seen[-1]) == [f"attrs-replay-{magic}.marshal", f"code-{magic}-O0.marshal"]
    # lsprotocol's classes, recorded by the first start (agent_ls.lsp.attrs_replay); what
    # else attrs compiled, and the rest of the start's compiles, in the code cache
    assert (data / "cache" / f"attrs-replay-{magic}.marshal").stat().st_size > 100_000
    assert seen[2] == seen[1], "a start that found everything in its caches rewrote one"
    # The recording keeps lsprotocol's classes' code: the code cache, loaded at every start
    # before the fork, holds none of it (~550 entries no start would read).
    stored = (data / "cache" / f"code-{magic}-O0.marshal").read_bytes()
    entries = marshal.loads(stored[len(MAGIC_NUMBER) :])
    files = [
        value.co_filename
        for value in map(marshal.loads, entries.values())
        if isinstance(value, types.CodeType)
    ]
    attrs_scripts = [f for f in files if f.startswith("<attrs generated")]
    assert attrs_scripts  # pygls's own classes
    assert not [f for f in attrs_scripts if "lsprotocol.types." in f]
