"""The server's cache of attrs' generated code (``agent_ls.lsp.attrs_cache``).

Checked against attrs itself: a process that imports lsprotocol without the cache compiles
every class's methods; a process served from a warm cache must end up with the same code,
byte for byte, and the same classes behaving the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.util import MAGIC_NUMBER
from pathlib import Path

import pytest

from tests.probes import CANON, UNREADABLE, run_json

# Every attrs class of lsprotocol.types: each generated method's code, hashed.
PROBE = CANON + r"""
import hashlib, json, sys
from pathlib import Path
use_cache = sys.argv[1] == "cache"
if use_cache:
    from agent_ls.lsp.attrs_cache import attrs_code_cache
    with attrs_code_cache(Path(sys.argv[2])) as stats:
        import lsprotocol.types as types
else:
    import lsprotocol.types as types
    stats = None
import attrs

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
    behaviour.append("accepted a str line")
except (TypeError, ValueError) as exc:
    behaviour.append(type(exc).__name__)
print(json.dumps({
    "digests": digests,
    "behaviour": behaviour,
    "stats": None if stats is None else [stats.hits, stats.misses, stats.written],
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
    path = tmp_path / "cache" / "attrs.marshal"
    first = probe("cache", str(path))
    hits, misses, written = first["stats"]  # type: ignore[misc]
    assert hits == 0 and misses > 500 and written  # lsprotocol has ~560 attrs classes
    assert path.read_bytes().startswith(MAGIC_NUMBER)
    assert (path.stat().st_mode & 0o077) == 0, "the cache is the user's alone"

    second = probe("cache", str(path))
    hits, misses, written = second["stats"]  # type: ignore[misc]
    assert (hits, misses, written) == (first["stats"][1], 0, False)  # type: ignore[index]
    assert len(plain["digests"]) > 1000  # type: ignore[arg-type]
    for run in (first, second):
        assert run["digests"] == plain["digests"]
        assert run["behaviour"] == plain["behaviour"]
    assert plain["behaviour"][1] is True and plain["behaviour"][2] is False  # type: ignore[index]


@pytest.mark.parametrize("content", list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_an_unreadable_cache_is_ignored_and_rewritten(
    tmp_path: Path, plain: dict[str, object], content: bytes
) -> None:
    path = tmp_path / "attrs.marshal"
    path.write_bytes(content)
    run = probe("cache", str(path))
    hits, misses, written = run["stats"]  # type: ignore[misc]
    assert hits == 0 and misses > 500 and written
    assert run["digests"] == plain["digests"]
    hits, misses, _ = probe("cache", str(path))["stats"]  # type: ignore[misc]
    assert misses == 0 and hits > 500


def test_an_unwritable_cache_dir_costs_nothing_but_the_cache(
    tmp_path: Path, plain: dict[str, object]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache dir would be")
    run = probe("cache", str(blocker / "cache" / "attrs.marshal"))
    assert run["stats"][2] is False  # type: ignore[index]
    assert run["digests"] == plain["digests"]


def test_the_server_keeps_its_cache_in_the_data_dir(workspace: Path, tmp_path: Path) -> None:
    from tests.rawclient import RawClient

    data = tmp_path / "data"
    for _ in range(2):  # a first start writes it; a second one starts from it
        server = RawClient(workspace, env={"AGENT_LS_DATA_DIR": str(data)})
        try:
            params = {"processId": os.getpid(), "rootUri": workspace.as_uri(), "capabilities": {}}
            assert "result" in server.request("initialize", params)
        finally:
            server.close()
        caches = list((data / "cache").glob("attrs-code-*.marshal"))
        assert [p.name for p in caches] == [f"attrs-code-{MAGIC_NUMBER.hex()}.marshal"]
        # lsprotocol's classes, recorded by the first start (agent_ls.lsp.attrs_replay); the
        # code cache then keeps what else attrs compiled
        replays = list((data / "cache").glob("attrs-replay-*.marshal"))
        assert [p.name for p in replays] == [f"attrs-replay-{MAGIC_NUMBER.hex()}.marshal"]
        assert replays[0].stat().st_size > 100_000


def _rewrite(path: Path, change: str) -> None:
    """Drop one entry of the cache file, or add a hundred that no start uses."""
    code = (
        "import marshal, sys\n"
        "from importlib.util import MAGIC_NUMBER\n"
        "from pathlib import Path\n"
        "p = Path(sys.argv[1])\n"
        "entries = marshal.loads(p.read_bytes()[len(MAGIC_NUMBER):])\n"
        "if sys.argv[2] == 'drop':\n"
        "    entries.pop(next(iter(entries)))\n"
        "else:\n"
        "    stale = compile('x = 1', '<stale>', 'exec')\n"
        "    entries.update({bytes([i]) * 16: stale for i in range(100)})\n"
        "p.write_bytes(MAGIC_NUMBER + marshal.dumps(entries))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path), change], check=True, timeout=60)


def test_a_miss_now_and_then_does_not_rewrite_the_file_but_many_stale_entries_do(
    tmp_path: Path,
) -> None:
    # A frozen attrs class's __hash__ source holds the hash of its name, which changes with
    # every interpreter: that one miss each start must not cost a rewrite of the whole file.
    path = tmp_path / "attrs.marshal"
    probe("cache", str(path))
    _rewrite(path, "drop")
    _, misses, written = probe("cache", str(path))["stats"]  # type: ignore[misc]
    assert misses == 1 and not written
    _rewrite(path, "stale")
    size = path.stat().st_size
    _, misses, written = probe("cache", str(path))["stats"]  # type: ignore[misc]
    assert misses == 1 and written  # the missing entry is back, the stale ones are gone
    assert path.stat().st_size < size
    _, misses, written = probe("cache", str(path))["stats"]  # type: ignore[misc]
    assert misses == 0 and not written
