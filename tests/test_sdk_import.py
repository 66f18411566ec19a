"""Deferred SDK package bodies (``agent_ls.models.sdk_import``): sound for the pinned SDK,
and what the first request loads.

The static checks read the installed ``anthropic`` package's sources; the behaviour runs in
fresh interpreters (the hook is process-wide) and is compared with a plain import.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from agent_ls.models.anthropic import SDK_VERSION
from agent_ls.models.sdk_import import installed_version, reexports

REPO = Path(__file__).resolve().parents[1]
SDK_ROOT = Path(importlib.util.find_spec("anthropic").origin).parent  # type: ignore[arg-type, union-attr]
EXCLUDED = "anthropic._vendor"
# Bodies that do more than re-export: they run whole, the first time a name of theirs is used.
# ``anthropic`` sets up the SDK's logging and renames its exports' ``__module__``;
# ``anthropic.lib.streaming`` defines type aliases; ``anthropic.tools`` star-imports.
IMPURE = {"anthropic", "anthropic.lib.streaming", "anthropic.tools"}


def _packages() -> dict[str, Path]:
    found = {}
    for init in SDK_ROOT.rglob("__init__.py"):
        parts = init.parent.relative_to(SDK_ROOT.parent).parts
        name = ".".join(parts)
        if name == EXCLUDED or name.startswith(EXCLUDED + "."):
            continue
        found[name] = init
    return found


def _submodules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"} | {
        p.parent.name for p in folder.glob("*/__init__.py")
    }


def _run(script: str, **env: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- the pinned SDK is the one checked ---------------------------------------------------


def test_the_hook_is_for_the_sdk_the_project_pins() -> None:
    pin = re.search(r'"anthropic==([^"]+)"', (REPO / "pyproject.toml").read_text())
    assert pin is not None
    assert pin.group(1) == SDK_VERSION == installed_version("anthropic")


def test_every_deferred_body_only_reexports_but_the_known_ones() -> None:
    packages = _packages()
    assert len(packages) > 100
    impure = {name for name, init in packages.items() if reexports(name, init.read_text()) is None}
    assert impure == IMPURE


def test_no_body_binds_a_submodules_name_to_something_else() -> None:
    # A deferred package answers a submodule's name with the submodule; a body that rebinds
    # that name (``from .x import x``) would answer differently once it ran.
    for name, init in _packages().items():
        table = reexports(name, init.read_text())
        if table is None:
            continue
        for bound in _submodules(init.parent) & set(table):
            assert table[bound] == (f"{name}.{bound}", None), (name, bound, table[bound])


def test_no_guarded_import_of_a_deferred_package() -> None:
    # ``try: from .x import y / except ImportError`` around a deferred package would see its
    # ImportError later, outside the try: every such guard in the SDK must concern modules
    # that are imported as usual (not packages, or under the excluded folder).
    packages = set(_packages())
    for path in SDK_ROOT.rglob("*.py"):
        parts = path.relative_to(SDK_ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Try):
                continue
            guards = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if not any("ImportError" in g or "ModuleNotFoundError" in g for g in guards):
                continue
            for stmt in node.body:
                for imp in ast.walk(stmt):
                    if not isinstance(imp, ast.ImportFrom) or imp.level == 0:
                        continue
                    base = importlib.util.resolve_name(
                        "." * imp.level + (imp.module or ""), package
                    )
                    named = {base} | {f"{base}.{a.name}" for a in imp.names}
                    assert not (named & packages), (path, ast.unparse(imp))


# --- behaviour, in fresh interpreters ------------------------------------------------------

LOADED = """
    import json, sys
    from agent_ls.models.anthropic import _prewarm_sdk
    _prewarm_sdk()
    names = sorted(k for k in sys.modules if k == "anthropic" or k.startswith("anthropic."))
    print(json.dumps(names))
"""


def test_the_warm_up_loads_less_than_half_of_the_sdk() -> None:
    deferred = set(_run(LOADED))
    eager = set(_run(LOADED, AGENT_LS_EAGER_SDK="1"))
    assert deferred < eager
    assert len(deferred) < 0.6 * len(eager), (len(deferred), len(eager))
    for unused in ("anthropic.lib.vertex", "anthropic.lib.bedrock", "anthropic.resources.beta"):
        assert unused in eager
        assert unused not in deferred


NAMES_OF = """
import importlib, json, sys, types
def names_of():
    out = {}
    for name in ("anthropic", "anthropic.types", "anthropic.types.beta", "anthropic.resources"):
        package = importlib.import_module(name)
        names = [n for n in dir(package) if not n.startswith("__")]
        modules = {n for n in names if isinstance(getattr(package, n), types.ModuleType)}
        out[name] = (sorted(set(names) - modules), sorted(modules))
    return out
"""


def test_names_resolved_early_are_what_each_body_binds() -> None:
    # Every re-export of every package, asked of the deferred package, is the very object the
    # package's body binds once it runs; then the packages hold what a plain import leaves.
    plain = _run(NAMES_OF + 'import anthropic\nprint(json.dumps({"dirs": names_of()}))\n')
    script = NAMES_OF + textwrap.dedent(
        f"""
        from agent_ls.models.anthropic import defer_sdk_packages
        from agent_ls.models.sdk_import import is_deferred, load, reexports
        defer_sdk_packages()
        names = {sorted(_packages())!r}
        impure = {sorted(IMPURE)!r}
        checked = mismatched = 0
        for name in names:
            if name in impure:
                continue
            package = importlib.import_module(name)
            if not is_deferred(package):
                continue  # a body that ran already (asked for by another package's code)
            with open(package.__spec__.origin, encoding="utf-8") as f:
                table = reexports(name, f.read())
            early = {{n: getattr(package, n) for n in table}}
            load(package)
            assert not is_deferred(package)
            for n, value in early.items():
                checked += 1
                mismatched += package.__dict__[n] is not value
        # A plain import made each submodule that some SDK code imports an attribute of its
        # package; a package loaded late imports a submodule when its name is asked for.
        unreachable = [
            (name, sub)
            for name, (_, subs) in {plain["dirs"]!r}.items()
            for sub in subs
            if not isinstance(getattr(importlib.import_module(name), sub, None), types.ModuleType)
        ]
        print(json.dumps({{
            "checked": checked, "mismatched": mismatched, "dirs": names_of(),
            "unreachable": unreachable,
        }}))
        """
    )
    result = _run(script)
    assert result["checked"] > 3000
    assert result["mismatched"] == 0
    assert result["unreachable"] == []
    for name, (values, _) in plain["dirs"].items():
        assert result["dirs"][name][0] == values, name


def test_hook_mechanics_on_a_package_of_our_own(tmp_path: Path) -> None:
    pkg = tmp_path / "demo_sdk"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "broken").mkdir()
    (tmp_path / "ran.py").write_text("order = []\n")
    (pkg / "_version.py").write_text('__version__ = "1.0"\n')
    (pkg / "__init__.py").write_text(
        '"""demo"""\nfrom .a import A as A\nfrom . import b\nfrom .c import C\n'
        '__all__ = ["A", "C"]\n'
    )
    for leaf in ("a", "b", "c"):
        (pkg / f"{leaf}.py").write_text(
            f"import ran\nran.order.append({leaf!r})\nclass {leaf.upper()}: pass\n"
        )
    (pkg / "sub" / "__init__.py").write_text("import ran\nran.order.append('sub')\nX = 1\n")
    (pkg / "sub" / "leaf.py").write_text("import ran\nran.order.append('sub.leaf')\n")
    (pkg / "broken" / "__init__.py").write_text("from .gone import nothing\n")
    script = """
        import json, sys
        sys.path.insert(0, sys.argv[1])
        from agent_ls.models.sdk_import import defer_package_bodies, is_deferred
        import ran
        out = {"wrong_version": defer_package_bodies("demo_sdk", version="2.0")}
        out["installed"] = defer_package_bodies("demo_sdk", version="1.0")
        import demo_sdk
        out["after_import"] = list(ran.order)
        A = demo_sdk.A
        out["after_A"] = list(ran.order)
        out["A_is_a_A"] = A is sys.modules["demo_sdk.a"].A
        import demo_sdk.sub.leaf
        out["after_sub_leaf"] = list(ran.order)
        out["sub_X"] = demo_sdk.sub.X
        out["after_sub_X"] = list(ran.order)
        out["star"] = sorted(demo_sdk.__all__)
        out["deferred_after_all"] = is_deferred(demo_sdk)
        import demo_sdk.broken
        errors = []
        for _ in range(2):
            try:
                demo_sdk.broken.anything
            except ImportError as exc:
                errors.append(type(exc).__name__)
        out["broken"] = errors
        try:
            demo_sdk.missing_name
        except AttributeError as exc:
            out["missing"] = str(exc)
        print(json.dumps(out))
    """
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["wrong_version"] is False and out["installed"] is True
    assert out["after_import"] == []  # the package's body did not run
    assert out["after_A"] == ["a"]  # only the module A comes from
    assert out["A_is_a_A"] is True
    assert out["after_sub_leaf"] == ["a", "sub.leaf"]  # a submodule without its package's body
    assert out["sub_X"] == 1 and out["after_sub_X"] == ["a", "sub.leaf", "sub"]
    assert out["star"] == ["A", "C"] and out["deferred_after_all"] is False
    assert out["broken"] == ["ModuleNotFoundError", "ModuleNotFoundError"]  # each time
    assert "missing_name" in out["missing"]


def test_eager_setting_turns_the_hook_off() -> None:
    out = _run(
        "import json\n"
        "from agent_ls.models.sdk_import import defer_package_bodies\n"
        f"print(json.dumps(defer_package_bodies('anthropic', version='{SDK_VERSION}')))\n",
        AGENT_LS_EAGER_SDK="1",
    )
    assert out is False


def test_the_sdks_own_logging_switch_gets_a_plain_import() -> None:
    # ``ANTHROPIC_LOG`` is read by the top package's body, which must then run at import.
    loaded = set(_run(LOADED, ANTHROPIC_LOG="info"))
    assert "anthropic.lib.vertex" in loaded


def test_the_canned_warm_up_stream_runs_through_the_async_client() -> None:
    # It fails quietly (the real request reports real problems), so a test says it works:
    # in memory, no network, the async stream classes the real requests use.
    out = _run(
        "import json, sys\n"
        "from agent_ls.models.anthropic import _prewarm_stream\n"
        "ok = _prewarm_stream()\n"
        "print(json.dumps([ok, 'anthropic.lib.streaming._messages' in sys.modules]))\n"
    )
    assert out == [True, True]
