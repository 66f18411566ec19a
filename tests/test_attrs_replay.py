"""lsprotocol's classes rebuilt from a recording (``agent_ls.lsp.attrs_replay``).

Checked against attrs itself: a process that imports lsprotocol with plain attrs and one that
rebuilds every class from the recording must end up with the same classes, member by member
(code, globals the code reads, closures, fields, slots, properties, signatures), described in
each process independently of the replay's own comparison, and behave the same.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.probes import run_json

DESCRIBE = r"""
import hashlib, inspect, json, re, sys, types
from types import CodeType

def scrub(text):
    return re.sub(r"0x[0-9a-f]+", "0x", text)

def canon(code):
    consts = tuple(canon(c) if isinstance(c, CodeType) else repr(c) for c in code.co_consts)
    return (code.co_code, code.co_flags, code.co_names, code.co_varnames, code.co_freevars,
            code.co_cellvars, code.co_filename, code.co_qualname, code.co_firstlineno,
            code.co_linetable, code.co_exceptiontable, code.co_argcount,
            code.co_kwonlyargcount, consts)

def names(code):
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, CodeType):
            out |= names(c)
    return out

def function(f):
    import builtins
    reads = {}
    for n in sorted(names(f.__code__)):
        if n in f.__globals__:
            reads[n] = scrub(repr(f.__globals__[n]))
        elif hasattr(builtins, n):
            reads[n] = "builtin"
    return {
        "code": hashlib.sha256(repr(canon(f.__code__)).encode()).hexdigest(),
        "names": [f.__name__, f.__qualname__, f.__module__, f.__doc__],
        "defaults": scrub(repr(f.__defaults__)), "kwdefaults": scrub(repr(f.__kwdefaults__)),
        "annotations": scrub(repr(f.__annotations__)),
        "closure": scrub(repr([c.cell_contents for c in f.__closure__ or ()])),
        "reads": reads,
    }

def describe(cls):
    members = {}
    for key, value in vars(cls).items():
        if isinstance(value, types.FunctionType):
            members[key] = function(value)
        elif key == "__attrs_attrs__":
            members[key] = [type(value).__name__, list(vars(type(value))),
                            [scrub(repr(a)) for a in value]]
        elif key == "__attrs_props__":
            members[key] = [scrub(repr(getattr(value, s))) for s in type(value).__slots__]
        elif key == "__doc__":
            members[key] = value
        else:
            members[key] = [type(value).__name__, scrub(repr(value))]
    return {"order": list(vars(cls)), "members": members, "mro": [c.__name__ for c in cls.__mro__],
            "signature": scrub(str(inspect.signature(cls)))}
"""

LSPROTOCOL_PROBE = (
    DESCRIBE
    + r"""
import pickle, traceback, weakref
from pathlib import Path
mode = sys.argv[1]
stats = None
if mode == "replay":
    from agent_ls.lsp.attrs_replay import attrs_replay
    with attrs_replay(Path(sys.argv[2])) as stats:
        import lsprotocol.types as lsp
else:
    import lsprotocol.types as lsp
import attrs
from lsprotocol.converters import get_converter

classes = {n: describe(c) for n, c in sorted(vars(lsp).items())
           if isinstance(c, type) and attrs.has(c) and c.__module__ == "lsprotocol.types"}
conv = get_converter()
behaviour = []
params = conv.structure({"processId": None, "rootUri": None, "capabilities": {
    "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True}},
    "window": {"workDoneProgress": True}}}, lsp.InitializeParams)
behaviour.append(scrub(repr(params)))
behaviour.append(conv.unstructure(params))
edit = lsp.WorkspaceEdit(document_changes=[lsp.TextDocumentEdit(
    text_document=lsp.OptionalVersionedTextDocumentIdentifier(uri="file:///a", version=None),
    edits=[lsp.TextEdit(range=lsp.Range(lsp.Position(0, 1), lsp.Position(0, 2)), new_text="x")])])
behaviour.append(conv.unstructure(edit))
behaviour.append(edit == conv.structure(conv.unstructure(edit), lsp.WorkspaceEdit))
item = lsp.MessageActionItem(title="Run")
behaviour.append(pickle.loads(pickle.dumps(item)) == item)
behaviour.append(weakref.ref(item)() is item)
for attempt in ("hash(item)", "item.other = 1", "lsp.Position(line=-1, character=0)",
                "setattr(lsp.Position(0, 0), 'line', -1)", "lsp.MessageActionItem(title=3)"):
    try:
        exec(attempt)
        behaviour.append([attempt, "ok"])
    except Exception as exc:
        behaviour.append([attempt, type(exc).__name__, traceback.format_exc().splitlines()[-5:]])
print(json.dumps({
    "classes": classes, "behaviour": behaviour,
    "stats": None if stats is None else [stats.replayed, stats.built, stats.recorded,
                                         stats.mismatched, stats.written],
}, default=repr))
"""
)


@pytest.fixture(scope="module")
def lsprotocol_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    recording = tmp_path_factory.mktemp("replay") / "replay.marshal"
    return {
        "plain": run_json(LSPROTOCOL_PROBE, "plain"),
        "recording": run_json(LSPROTOCOL_PROBE, "replay", str(recording)),
        "replayed": run_json(LSPROTOCOL_PROBE, "replay", str(recording)),
        "again": run_json(LSPROTOCOL_PROBE, "replay", str(recording)),
    }


def test_the_first_start_records_every_lsprotocol_class_and_later_starts_replay_them(
    lsprotocol_runs: dict[str, dict[str, object]],
) -> None:
    count = len(lsprotocol_runs["plain"]["classes"])  # type: ignore[arg-type]
    assert count > 500
    assert lsprotocol_runs["recording"]["stats"] == [0, count, count, [], True]
    assert lsprotocol_runs["replayed"]["stats"] == [count, 0, 0, [], False]
    assert lsprotocol_runs["again"]["stats"] == [count, 0, 0, [], False]


@pytest.mark.parametrize("run", ["recording", "replayed"])
def test_replayed_classes_are_attrs_classes_member_for_member(
    lsprotocol_runs: dict[str, dict[str, object]], run: str
) -> None:
    plain = lsprotocol_runs["plain"]["classes"]
    other = lsprotocol_runs[run]["classes"]
    assert isinstance(plain, dict) and isinstance(other, dict)
    assert plain.keys() == other.keys()
    different = [name for name in plain if plain[name] != other[name]]
    assert different == [], (different[:3], plain[different[0]], other[different[0]])


def test_replayed_classes_behave_as_attrs_classes(
    lsprotocol_runs: dict[str, dict[str, object]],
) -> None:
    plain = lsprotocol_runs["plain"]["behaviour"]
    assert lsprotocol_runs["replayed"]["behaviour"] == plain
    # the probe itself can tell a broken class: validation, slots, hashing and tracebacks
    # through the generated __init__ (its source, from linecache) are all there
    assert isinstance(plain, list)
    outcomes = {row[0]: row[1:] for row in plain if isinstance(row, list)}
    assert outcomes["hash(item)"][0] == "TypeError"
    assert outcomes["item.other = 1"][0] == "AttributeError"
    assert outcomes["lsp.Position(line=-1, character=0)"][0] == "ValueError"
    assert "__attr_validator_line" in " ".join(outcomes["lsp.Position(line=-1, character=0)"][1])
    assert outcomes["setattr(lsp.Position(0, 0), 'line', -1)"][0] == "ValueError"
    assert outcomes["lsp.MessageActionItem(title=3)"][0] == "TypeError"


SHAPES = """
import functools
import attrs


@attrs.define
class Point:
    x: int = attrs.field(validator=attrs.validators.instance_of(int))
    y: int = 0

    def moved(self):
        return __class__(self.x + 1, self.y)

    def __repr__(self):
        return f"P({self.x},{self.y})"


@attrs.define
class Bag:
    items: list = attrs.field(factory=lambda: [1])


@attrs.define
class Child(Point):
    z: int = 0


@attrs.define
class Lazy:
    a: int = 1

    @functools.cached_property
    def double(self):
        return self.a * 2
"""

SHAPES_PROBE = (
    DESCRIBE
    + r"""
from pathlib import Path
mode = sys.argv[1]
stats = None
if mode == "replay":
    from agent_ls.lsp.attrs_replay import attrs_replay
    with attrs_replay(Path(sys.argv[2]), module="shapes") as stats:
        import shapes
else:
    import shapes
p = shapes.Point(1)
try:
    p.x = "no"
    rejected = False
except TypeError:
    rejected = True
print(json.dumps({
    "classes": {n: describe(getattr(shapes, n)) for n in ("Point", "Bag", "Child", "Lazy")},
    "fields": {n: [a.name for a in attrs.fields(getattr(shapes, n))]
               for n in ("Point", "Bag", "Child", "Lazy")},
    "behaviour": [repr(p), type(p.moved()) is shapes.Point, repr(p.moved()), rejected,
                  shapes.Bag().items, shapes.Lazy(3).double, repr(shapes.Child(1, 2, 3))],
    "stats": None if stats is None else [stats.replayed, stats.built, stats.recorded,
                                         stats.written],
}, default=repr))
""".replace("import attrs\n", "").replace(
        "from pathlib import Path\n", "from pathlib import Path\nimport attrs\n", 1
    )
)


def test_what_cannot_be_replayed_is_left_to_attrs(tmp_path: Path) -> None:
    (tmp_path / "shapes.py").write_text(SHAPES, encoding="utf-8")
    recording = tmp_path / "replay.marshal"
    plain = run_json(SHAPES_PROBE, "plain", path=[str(tmp_path)])
    first = run_json(SHAPES_PROBE, "replay", str(recording), path=[str(tmp_path)])
    second = run_json(SHAPES_PROBE, "replay", str(recording), path=[str(tmp_path)])
    # Point (own __repr__, a method holding __class__) replays; Bag (a factory defined in the
    # body), Child (a base class) and Lazy (a cached property) are built by attrs each time
    assert first["stats"] == [0, 4, 1, True]
    assert second["stats"] == [1, 3, 0, False]
    for run in (first, second):
        assert run["classes"] == plain["classes"]
        assert run["behaviour"] == plain["behaviour"]
    assert plain["behaviour"] == ["P(1,0)", True, "P(2,0)", True, [1], 6, "Child(x=1, y=2, z=3)"]


def test_a_changed_body_is_left_to_attrs_and_a_bad_recording_ignored(tmp_path: Path) -> None:
    source = tmp_path / "shapes.py"
    source.write_text(SHAPES, encoding="utf-8")
    recording = tmp_path / "replay.marshal"
    run_json(SHAPES_PROBE, "replay", str(recording), path=[str(tmp_path)])
    # Same size and time as recorded, another field name: the recording's key still matches,
    # the body does not
    stat = source.stat()
    source.write_text(
        SHAPES.replace("    y: int = 0", "    w: int = 0").replace("self.y", "self.w"),
        encoding="utf-8",
    )
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    changed = run_json(SHAPES_PROBE, "replay", str(recording), path=[str(tmp_path)])
    assert changed["fields"]["Point"] == ["x", "w"]  # type: ignore[index]
    assert changed["stats"][:2] == [0, 4]  # type: ignore[index]
    assert changed["behaviour"][0] == "P(1,0)"  # type: ignore[index]
    # An upgrade (another size or time) records again
    source.write_text(SHAPES + "\n", encoding="utf-8")
    upgraded = run_json(SHAPES_PROBE, "replay", str(recording), path=[str(tmp_path)])
    assert upgraded["stats"] == [0, 4, 1, True]
    # A recording with the right key and recipes it cannot follow: attrs builds every class
    _rewrite_recipes(recording)
    unfollowable = run_json(SHAPES_PROBE, "replay", str(recording), path=[str(tmp_path)])
    assert unfollowable["stats"] == [0, 4, 1, True]
    assert unfollowable["behaviour"] == upgraded["behaviour"]
    # Garbage in the file: ignored, recorded again
    recording.write_bytes(recording.read_bytes()[:40] + b"\x00garbage")
    broken = run_json(SHAPES_PROBE, "replay", str(recording), path=[str(tmp_path)])
    assert broken["stats"] == [0, 4, 1, True]
    assert broken["behaviour"] == upgraded["behaviour"]


def _rewrite_recipes(path: Path) -> None:
    code = (
        "import marshal, sys\n"
        "from importlib.util import MAGIC_NUMBER\n"
        "p = sys.argv[1]\n"
        "key, recipes = marshal.loads(open(p, 'rb').read()[len(MAGIC_NUMBER):])\n"
        "recipes = {name: ('junk', 1) for name in recipes}\n"
        "open(p, 'wb').write(MAGIC_NUMBER + marshal.dumps((key, recipes)))\n"
    )
    subprocess.run([sys.executable, "-c", code, str(path)], check=True, timeout=60)


def test_the_server_start_replays_lsprotocol(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        from agent_ls import codecache
        from agent_ls.lsp.attrs_replay import lsprotocol_from_caches
        codecache.install()
        with lsprotocol_from_caches() as stats:
            import agent_ls.lsp.server
        print(stats.replayed, stats.built)
        """
    )
    env = {**os.environ, "AGENT_LS_DATA_DIR": str(tmp_path)}
    runs = [
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
        )
        for _ in range(2)
    ]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    first, second = (tuple(map(int, r.stdout.split())) for r in runs)
    assert first[0] == 0 and first[1] > 500
    assert second == (first[1], 0)


def test_replaying_reads_no_package_metadata(tmp_path: Path) -> None:
    # attrs' version comes from its package metadata (importlib.metadata, ~20 ms of the start):
    # the recording is keyed by attrs' files instead, and a replaying start reads none.
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from agent_ls.lsp.attrs_replay import attrs_replay\n"
        "with attrs_replay(Path(sys.argv[1])) as stats:\n"
        "    import lsprotocol.types\n"
        "print(stats.replayed, 'importlib.metadata' in sys.modules)\n"
    )
    recording = tmp_path / "replay.marshal"
    runs = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", code, str(recording)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        runs.append(done.stdout.split())
    assert runs[1] == ["554", "False"], runs
