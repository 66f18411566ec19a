"""The cache of code the standard library compiles from strings (``agent_ls.codecache``).

Checked against the compiler itself: a process without the cache compiles every dataclass's
methods, every forward reference and every namedtuple's ``__new__``; a process served from
the cache must end up with the same code, byte for byte, and the same behaviour.
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.util import MAGIC_NUMBER
from pathlib import Path

import pytest

from tests.fakeapi import FakeAPI, Turn
from tests.probes import CANON, UNREADABLE, run_json

PROBE = CANON + r"""
import hashlib, json, sys
from pathlib import Path
import re
compile_pattern = re._compiler.compile  # the standard library's own, taken before install
stats = None
if sys.argv[1] == "cache":
    from agent_ls import codecache
    stats = codecache.install(Path(sys.argv[2]))
import collections, dataclasses, typing
from types import CodeType
from typing import ClassVar, Optional


def digest(code):
    return hashlib.sha256(repr(canon(code)).encode()).hexdigest()

@dataclasses.dataclass(frozen=True, order=True)
class Point:
    x: int
    y: int = 0
    tags: list = dataclasses.field(default_factory=list, compare=False)
    unit: ClassVar[str] = "px"

@dataclasses.dataclass(slots=True, kw_only=True)
class Box:
    corner: "Point"
    label: Optional["str"] = None

@dataclasses.dataclass(eq=False)
class Node:
    parent: "Node | None" = None
    initial: dataclasses.InitVar[int] = 0
    def __post_init__(self, initial):
        self.value = initial * 2

Pair = collections.namedtuple("Pair", "left right", defaults=(None,))
import agent_ls.ports.model, agent_ls.ports.messages, agent_ls.ports.editor  # ours

digests = {}
classes = [Point, Box, Node] + [
    c for m in (agent_ls.ports.model, agent_ls.ports.messages, agent_ls.ports.editor)
    for c in vars(m).values() if dataclasses.is_dataclass(c) and isinstance(c, type)
]
for cls in classes:
    for name, value in sorted(vars(cls).items()):
        code = getattr(value, "__code__", None)
        if code is not None and code.co_filename == "<string>":
            digests[f"{cls.__qualname__}.{name}"] = digest(code)
digests["Pair.__new__"] = digest(Pair.__new__.__code__)
hints = typing.get_type_hints(Box)
refs = [typing.ForwardRef("Point"), typing.ForwardRef("list[Point] | None")]
for ref in refs:
    digests[f"ForwardRef({ref.__forward_arg__})"] = digest(ref.__forward_code__)
p = Point(1, 2)
try:
    p.x = 3
    frozen = "assigned"
except dataclasses.FrozenInstanceError:
    frozen = "frozen"
behaviour = [
    repr(p), p == Point(1, 2, ["ignored"]), p < Point(1, 3), hash(p) == hash(Point(1, 2)),
    frozen, repr(Box(corner=p)), hasattr(Box(corner=p), "__dict__"), Node(initial=4).value,
    repr(Pair(1)), repr(hints), [repr(r._evaluate(globals(), None, frozenset())) for r in refs],
]
PATTERNS = [
    (r"(?P<word>\w+)\s*=\s*(?P<value>[^;]+);?", 0), (r"^\s*#.*$", re.MULTILINE),
    (r"straße|STRASSE", re.IGNORECASE), (r"(?<=a)b(?!c)|[\u0400-\u04ff]+", 0),
    (r"[a-z]+ \d{2,4}  # verbose", re.VERBOSE | re.ASCII), (rb"\x00[\x80-\xff]{1,3}", 0),
    (rb"[a-z]+", re.LOCALE),  # never cached: its program depends on the locale
]
for text, flags in PATTERNS:
    pattern = re.compile(text, flags)
    fresh = compile_pattern(text, flags)  # compiled here and now, without the cache
    assert pattern == fresh, text  # Pattern equality compares the compiled program
    assert (pattern.groups, pattern.groupindex) == (fresh.groups, fresh.groupindex)
    behaviour.append([repr(pattern), pattern.groups, dict(pattern.groupindex)])
subject = "key = value; straße # x = 1\nbé"
behaviour.append([m.group(0) for m in re.compile(PATTERNS[0][0]).finditer(subject)])
behaviour.append(bool(re.compile(PATTERNS[2][0], re.I).search("STRASSE")))
counts = None if stats is None else [stats.hits, stats.misses]  # (before writing imports more)
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


def test_cached_code_is_the_code_the_compiler_gives(
    tmp_path: Path, plain: dict[str, object]
) -> None:
    path = tmp_path / "cache" / "code.marshal"
    first = probe("cache", str(path))
    hits, misses, written = first["stats"]  # type: ignore[misc]
    assert misses > 50 and written == 1
    assert path.read_bytes().startswith(MAGIC_NUMBER)
    assert (path.stat().st_mode & 0o077) == 0, "the cache is the user's alone"

    second = probe("cache", str(path))
    assert second["stats"] == [hits + misses, 0, 0]  # all from the file; nothing to write
    assert len(plain["digests"]) > 40  # type: ignore[arg-type]
    assert "Box.__init__" in plain["digests"] and "Pair.__new__" in plain["digests"]  # type: ignore[operator]
    for run in (first, second):
        assert run["digests"] == plain["digests"]
        assert run["behaviour"] == plain["behaviour"]
    assert plain["behaviour"][1:5] == [True, True, True, "frozen"]  # type: ignore[index]


@pytest.mark.parametrize("content", list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_an_unreadable_cache_is_ignored_and_rewritten(
    tmp_path: Path, plain: dict[str, object], content: bytes
) -> None:
    path = tmp_path / "code.marshal"
    path.write_bytes(content)
    run = probe("cache", str(path))
    _, misses, written = run["stats"]  # type: ignore[misc]
    assert misses > 50 and written == 1
    assert run["digests"] == plain["digests"]
    assert probe("cache", str(path))["stats"][1] == 0  # type: ignore[index]


def test_an_unwritable_cache_dir_costs_nothing_but_the_cache(
    tmp_path: Path, plain: dict[str, object]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache dir would be")
    run = probe("cache", str(blocker / "cache" / "code.marshal"))
    assert run["stats"][2] == 0  # type: ignore[index]
    assert run["digests"] == plain["digests"]


def test_a_module_with_its_own_stand_in_is_left_alone(tmp_path: Path) -> None:
    code = (
        "import dataclasses, sys\n"
        "from pathlib import Path\n"
        "mine = lambda *a: exec(*a)\n"
        "dataclasses.exec = mine\n"
        "from agent_ls import codecache\n"
        "assert codecache.install(Path(sys.argv[1])) is None\n"
        "assert dataclasses.exec is mine\n"
        "import typing, collections\n"
        "assert 'compile' not in vars(typing) and 'eval' not in vars(collections)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "c.marshal")], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


# What a later process imports of the server's and the model worker's modules.
LATER = r"""
import sys
from pathlib import Path
import tokenize  # its pattern lists string prefixes in a set's order: new at each hash seed
tokenize._compile(tokenize.PseudoToken)
from agent_ls import codecache
stats = codecache.install(Path(sys.argv[1]))
import agent_ls.ports.model  # (the client's own, before it forks)
before = stats.misses
import agent_ls.agent.loop, agent_ls.lsp.server  # the server's
from agent_ls.models.anthropic import AnthropicModel
AnthropicModel("m", api_key="k").import_sdk()  # the worker's
print(before, stats.misses - before, stats.hits)
"""


def test_a_run_keeps_what_its_server_and_worker_compiled(workspace: Path, tmp_path: Path) -> None:
    # The client installs the cache and forks the server and the model worker; each writes
    # what it compiled anew, so the next run's processes compile none of it. The worker's
    # writes (after its stream, or the quiet-time rest's on a slow first start) end before
    # it does, and the processes' writes do not undo one another: this failed in most runs.
    data = tmp_path / "data"
    api = FakeAPI().start()
    try:
        api.enqueue(Turn(text="Done."))
        env = {
            **os.environ,
            "ANTHROPIC_API_KEY": "k",
            "ANTHROPIC_BASE_URL": api.url,
            "AGENT_LS_MODEL": "anthropic:claude-sonnet-5-5",
            "AGENT_LS_DATA_DIR": str(data),
        }
        done = subprocess.run(
            [sys.executable, "-m", "agent_ls", "run", "--yes", "-q", "hi"],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    finally:
        api.stop()
    [path] = (data / "cache").glob("code-*.marshal")
    assert path.name == f"code-{MAGIC_NUMBER.hex()}-O{sys.flags.optimize}.marshal"
    later = subprocess.run(
        [sys.executable, "-c", LATER, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONDONTWRITEBYTECODE": "1"},
    )
    assert later.returncode == 0, later.stderr
    client_misses, misses, hits = (int(n) for n in later.stdout.split())
    assert client_misses == 0
    assert misses == 0 and hits > 500, later.stdout


CONVERTER = r"""
import hashlib, json, sys
from pathlib import Path
from types import CodeType
stats = None
if sys.argv[1] == "cache":
    from agent_ls import codecache
    stats = codecache.install(Path(sys.argv[2]))
from lsprotocol import types
from agent_ls.lsp.server import server  # covers cattrs' code generation, when installed

def canon(code):
    consts = tuple(canon(c) if isinstance(c, CodeType) else repr(c) for c in code.co_consts)
    return (code.co_code, code.co_flags, code.co_names, code.co_varnames, code.co_filename,
            code.co_qualname, code.co_firstlineno, code.co_linetable, consts)

converter = server.protocol._converter
before = None if stats is None else stats.misses
capabilities = {"window": {"workDoneProgress": True}}
params = converter.structure(
    {"processId": 1, "rootUri": "file:///w", "capabilities": capabilities},
    types.InitializeParams,
)
result = converter.unstructure(types.InitializeResult(
    capabilities=types.ServerCapabilities(execute_command_provider=types.ExecuteCommandOptions(
        commands=["agent.ask"])),
    server_info=types.ServerInfo(name="agent-ls", version="1")))
def digest(hook):
    return hashlib.sha256(repr(canon(hook.__code__)).encode()).hexdigest()

digests = {}
for cls in (types.InitializeParams, types.ClientCapabilities, types.WindowClientCapabilities):
    digests[f"structure {cls.__name__}"] = digest(converter.get_structure_hook(cls))
for cls in (types.InitializeResult, types.ServerCapabilities, types.ExecuteCommandOptions):
    digests[f"unstructure {cls.__name__}"] = digest(converter.get_unstructure_hook(cls))
misses = None if stats is None else stats.misses - before
if stats is not None:
    codecache.save()
print(json.dumps({
    "digests": digests,
    "behaviour": [params.capabilities.window.work_done_progress, result],
    "misses": misses,
}))
"""


def test_the_servers_message_converters_come_from_the_cache(tmp_path: Path) -> None:
    # pygls's converter generates a function per message class (cattrs); with the cache
    # installed, the server covers that too: the same code, compiled once.
    def run(*args: str) -> dict[str, object]:
        return run_json(CONVERTER, *args, env={"AGENT_LS_DATA_DIR": str(tmp_path)})

    plain = run("plain")
    path = tmp_path / "code.marshal"
    first, second = run("cache", str(path)), run("cache", str(path))
    assert first["misses"] > 5  # type: ignore[operator]
    assert second["misses"] == 0
    for cached in (first, second):
        assert cached["digests"] == plain["digests"]
        assert cached["behaviour"] == plain["behaviour"]
    assert plain["behaviour"][0] is True  # type: ignore[index]


FEW = r"""
import sys
from pathlib import Path
from agent_ls import codecache
stats = codecache.install(Path(sys.argv[1]))
import dataclasses
def define(n):
    for i in range(n):  # each its own fields: a source no process compiled before
        dataclasses.make_dataclass(f"C{i}", [(f"field_{sys.argv[2]}_{i}", int)])
define(int(sys.argv[3]))
codecache.save()
print(stats.misses, stats.written)
"""


def test_a_few_sources_compiled_anew_do_not_rewrite_the_file(tmp_path: Path) -> None:
    # Some sources change at every start (a pattern listing a set in hash-seed order): each
    # start compiles them, and writing them would rewrite the file at every start and grow it.
    path = tmp_path / "code.marshal"

    def start(tag: str, new: int) -> tuple[int, int]:
        done = subprocess.run(
            [sys.executable, "-c", FEW, str(path), tag, str(new)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        misses, written = (int(n) for n in done.stdout.split())
        return misses, written

    assert start("a", 40)[1] == 1  # the first start writes what it compiled
    before = path.read_bytes()
    misses, written = start("b", 2)  # two dataclasses of new shape: six methods
    assert misses >= 2 and written == 0
    assert path.read_bytes() == before
    assert start("c", 30)[1] == 1  # many: written
    assert len(path.read_bytes()) > len(before)
