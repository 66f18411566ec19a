"""Deferred SDK package bodies (``agent_ls.models.sdk_import``): sound for the pinned SDK,
and what the first request loads.

The static checks read the installed ``anthropic`` and ``openai`` packages' sources; the
behaviour runs in fresh interpreters (the hook is process-wide) and is compared with a plain
import.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_ls.models import anthropic as anthropic_model
from agent_ls.models import openai as openai_model
from agent_ls.models.sdk_import import installed_version, reexports

FORWARDED = {"anthropic": anthropic_model.FORWARDED, "openai": {}}

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Sdk:
    name: str
    version: str
    impure: frozenset[str]  # bodies that do more than re-export, reviewed
    shadows: frozenset[tuple[str, str]]  # (package, submodule name) a body rebinds, reviewed

    @property
    def root(self) -> Path:
        return Path(importlib.util.find_spec(self.name).origin).parent  # type: ignore[arg-type, union-attr]

    @property
    def excluded(self) -> str:
        return f"{self.name}._vendor"


# Bodies that do more than re-export run whole, the first time a name of theirs is used.
# ``anthropic`` sets up the SDK's logging and renames its exports' ``__module__``;
# ``anthropic.tools`` star-imports. (``anthropic.lib.streaming`` also defines type aliases:
# those run its body when asked for; its re-exports are taken alone.)
# Both top packages bind ``resources`` to a proxy of the module of that name: deferred, the
# name gives the module itself.
ANTHROPIC = Sdk(
    "anthropic",
    anthropic_model.SDK_VERSION,
    frozenset({"anthropic", "anthropic.tools"}),
    frozenset({("anthropic", "resources")}),
)
# openai's resource packages export lazily themselves (a module ``__getattr__``), as does its
# top package; ``openai.resources.webhooks`` subclasses what it imports. Its top package also
# binds ``_client`` (the module-level client, None), and ``openai.providers`` re-exports the
# functions ``vertex`` and ``bedrock`` of the modules of those names: asked for, the body
# answers (tested below).
OPENAI = Sdk(
    "openai",
    openai_model.SDK_VERSION,
    frozenset({"openai.resources.webhooks"}),
    frozenset(
        {
            ("openai", "resources"),
            ("openai", "_client"),
            ("openai.providers", "vertex"),
            ("openai.providers", "bedrock"),
        }
    ),
)
SDKS = [ANTHROPIC, OPENAI]
per_sdk = pytest.mark.parametrize("sdk", SDKS, ids=[s.name for s in SDKS])


def _packages(sdk: Sdk) -> dict[str, Path]:
    found = {}
    for init in sdk.root.rglob("__init__.py"):
        name = ".".join(init.parent.relative_to(sdk.root.parent).parts)
        if name == sdk.excluded or name.startswith(sdk.excluded + "."):
            continue
        found[name] = init
    return found


def _submodules(folder: Path) -> set[str]:
    return {p.stem for p in folder.glob("*.py") if p.name != "__init__.py"} | {
        p.parent.name for p in folder.glob("*/__init__.py")
    }


def _lazy_itself(source: str) -> bool:
    """A body with its own module ``__getattr__`` (the SDK exports lazily already)."""
    return any(
        isinstance(n, ast.FunctionDef) and n.name == "__getattr__"
        for n in ast.walk(ast.parse(source))
    )


def _bound_at_top(source: str) -> dict[str, str]:
    """Every name a body binds at module level (inside top-level if/try too), with how."""
    bound: dict[str, str] = {}

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.ImportFrom | ast.Import):
                for alias in node.names:
                    if alias.name != "*":
                        bound[alias.asname or alias.name.split(".")[0]] = ast.unparse(node)
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        bound[target.id] = ast.unparse(node)[:80]
            elif isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AnnAssign):
                name = node.target if isinstance(node, ast.AnnAssign) else node
                bound[getattr(name, "id", getattr(name, "name", ""))] = type(node).__name__
            elif isinstance(node, ast.If | ast.Try):
                visit(node.body)
                visit(node.orelse)

    visit(ast.parse(source).body)
    return bound


def _run(script: str, *argv: str, **env: str) -> Any:
    """Run ``script`` (with ``argv``) in a fresh interpreter; its last line, as JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *argv],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


# --- the pinned SDKs are the ones checked --------------------------------------------------


@per_sdk
def test_the_hook_is_for_the_sdk_the_project_pins(sdk: Sdk) -> None:
    pin = re.search(rf'"{sdk.name}==([^"]+)"', (REPO / "pyproject.toml").read_text())
    assert pin is not None
    assert pin.group(1) == sdk.version == installed_version(sdk.name)


@per_sdk
def test_every_deferred_body_only_reexports_but_the_known_ones(sdk: Sdk) -> None:
    packages = _packages(sdk)
    assert len(packages) > 100
    impure = {
        name
        for name, init in packages.items()
        if reexports(name, init.read_text()) is None and not _lazy_itself(init.read_text())
    }
    assert impure == sdk.impure


@per_sdk
def test_the_bodies_that_rebind_a_submodules_name_are_the_reviewed_ones(sdk: Sdk) -> None:
    # A deferred package answers a submodule's name with the submodule; a body that rebinds
    # that name (``from .x import x``) would answer differently once it ran.
    shadows = set()
    for name, init in _packages(sdk).items():
        source = init.read_text()
        table = reexports(name, source)
        subs = _submodules(init.parent)
        if table is not None:
            for bound in subs & set(table):
                if table[bound] != (f"{name}.{bound}", None):
                    shadows.add((name, bound))
        else:
            for bound, how in _bound_at_top(source).items():
                if bound in subs and how not in (f"from . import {bound}",):
                    shadows.add((name, bound))
    assert shadows == sdk.shadows


@per_sdk
def test_a_rebound_submodule_name_gives_what_a_plain_import_gives(sdk: Sdk) -> None:
    shadows = sorted(sdk.shadows)
    probe = (
        "import importlib, json\n"
        "def kind(v):\n"
        "    return f'module {v.__name__}' if isinstance(v, type(json)) else type(v).__name__\n"
        f"out = [kind(getattr(importlib.import_module(p), n)) for p, n in {shadows!r}]\n"
        "print(json.dumps(out))\n"
    )
    plain = _run(f"import {sdk.name}\n" + probe)
    deferred = _run(
        f"from agent_ls.models.{sdk.name} import defer_sdk_packages\ndefer_sdk_packages()\n" + probe
    )
    assert deferred == plain


def test_each_forwarded_module_only_imports_and_defines() -> None:
    # Deferring a module is sound when running its body later changes nothing but when: it
    # imports, defines, and binds constants (a logger too); a forwarded name is a function
    # it defines, which its importers only call (a forwarder is not the function itself).
    def calls_only_get_logger(value: ast.expr | None) -> bool:
        calls = [n for n in ast.walk(value) if isinstance(n, ast.Call)] if value else []
        return all(ast.unparse(c) == "logging.getLogger(__name__)" for c in calls)

    for module, functions in anthropic_model.FORWARDED.items():
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None and not spec.submodule_search_locations
        body = ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body
        defined = {n.name for n in body if isinstance(n, ast.FunctionDef)}
        assert set(functions) <= defined, module
        for node in body:
            if isinstance(node, ast.If):
                assert ast.unparse(node.test) == "TYPE_CHECKING", (module, ast.unparse(node))
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                assert calls_only_get_logger(node.value), (module, ast.unparse(node))
            else:
                assert isinstance(
                    node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.ClassDef | ast.Expr
                ), (module, ast.unparse(node))
        # Its importers in the SDK only call the forwarded names (or run where the module runs).
        for path in ANTHROPIC.root.rglob("*.py"):
            source = path.read_text(encoding="utf-8")
            if not any(name in source for name in functions):
                continue
            tree = ast.parse(source)
            for name in functions:
                uses = [
                    n
                    for n in ast.walk(tree)
                    if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)
                ]
                called = {id(c.func) for c in ast.walk(tree) if isinstance(c, ast.Call)}
                assert all(id(u) in called for u in uses), (path, name)


@per_sdk
def test_no_guarded_import_of_a_deferred_package(sdk: Sdk) -> None:
    # ``try: from .x import y / except ImportError`` around a deferred package would see its
    # ImportError later, outside the try: every such guard in the SDK must concern modules
    # that are imported as usual (not packages, or under the excluded folder).
    packages = set(_packages(sdk))
    for path in sdk.root.rglob("*.py"):
        parts = path.relative_to(sdk.root.parent).with_suffix("").parts
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
                    if isinstance(imp, ast.Import):
                        named = {a.name for a in imp.names}
                    elif isinstance(imp, ast.ImportFrom):
                        base = importlib.util.resolve_name(
                            "." * imp.level + (imp.module or ""), package
                        )
                        named = {base} | {f"{base}.{a.name}" for a in imp.names}
                    else:
                        continue
                    assert not (named & packages), (path, ast.unparse(imp))


# --- behaviour, in fresh interpreters ------------------------------------------------------

WARMED = """
import json, sys
from agent_ls.models.{name} import {model}
{model}("m", api_key="k").prepare_sdk()
print(json.dumps(sorted(k for k in sys.modules if k == "{name}" or k.startswith("{name}."))))
"""
MODELS = {"anthropic": "AnthropicModel", "openai": "OpenAIModel"}
UNUSED = {
    "anthropic": (
        "anthropic.lib.vertex",
        "anthropic.lib.bedrock",
        "anthropic.resources.beta",
        # lib.streaming's body makes beta aliases (150 ms of pydantic generics): not its
        # MessageStreamManager's business.
        "anthropic.lib.streaming._beta_messages",
    ),
    "openai": ("openai.lib.azure", "openai.lib.bedrock", "openai.providers"),
}


@per_sdk
def test_the_warm_up_loads_less_than_half_of_the_sdk(sdk: Sdk) -> None:
    script = WARMED.format(name=sdk.name, model=MODELS[sdk.name])
    deferred = set(_run(script))
    eager = set(_run(script, AGENT_LS_EAGER_SDK="1"))
    assert deferred < eager
    assert len(deferred) < 0.6 * len(eager), (len(deferred), len(eager))
    for unused in UNUSED[sdk.name]:
        assert unused in eager
        assert unused not in deferred


FIRST_STREAM = """
import asyncio, json, sys
from tests.fakeapi import FakeAPI, Turn
from agent_ls.models.{name} import {model}
from agent_ls.ports.model import ModelRequest
from agent_ls.ports.messages import Message, TextBlock
api = FakeAPI().start()
model = {model}("m", api_key="k", base_url=api.url + "{path}")
{warm}
before = set(sys.modules)
api.enqueue(Turn(text="hello"))
async def main():
    request = ModelRequest(
        messages=[Message(role="user", content=[TextBlock("hi")])], system="s", tools=[]
    )
    return [type(e).__name__ async for e in model.stream(request)]
events = asyncio.run(main())
print(json.dumps({{"events": events, "imported": sorted(set(sys.modules) - before)}}))
"""


WARM_UPS = {
    "in process": "model.prepare_sdk()",
    # The model worker's: the import in a thread, then the canned stream on the loop.
    "in the worker": "asyncio.run(model.warm_then_rehearse(lambda: None, lambda: True))",
}
# The module of the resource each SDK streams with (its first use builds ~100 ms of models).
STREAM_RESOURCE = {
    "anthropic": "anthropic.types.raw_message_stream_event",
    "openai": "openai.resources.chat.completions.completions",
}


@per_sdk
@pytest.mark.parametrize("warm_up", sorted(WARM_UPS))
def test_the_first_real_stream_imports_nothing(sdk: Sdk, warm_up: str) -> None:
    # The warm-up (a canned in-memory stream, then the HTTP transport's modules) leaves the
    # first request nothing to import on the event loop.
    path = "/v1" if sdk.name == "openai" else ""
    script = FIRST_STREAM.format(
        name=sdk.name, model=MODELS[sdk.name], path=path, warm=WARM_UPS[warm_up]
    )
    out = _run(script)
    assert out["events"][-1] == "TurnComplete"
    assert out["imported"] == []


@per_sdk
def test_without_a_rehearsal_the_stream_resource_is_still_ready(sdk: Sdk) -> None:
    # `agent-ls run`'s worker skips the canned stream (the real one follows at once), but the
    # resource the request goes through is imported and built before ready, in the thread.
    path = "/v1" if sdk.name == "openai" else ""
    warm = "asyncio.run(model.warm_then_rehearse(lambda: None, lambda: False))"
    script = FIRST_STREAM.format(name=sdk.name, model=MODELS[sdk.name], path=path, warm=warm)
    out = _run(script)
    assert out["events"][-1] == "TurnComplete"
    assert STREAM_RESOURCE[sdk.name] not in out["imported"]


FIRST_REQUEST = """
import asyncio, json, sys
from tests.fakeapi import FakeAPI, Fault, Turn
from agent_ls.models.anthropic import AnthropicModel
from agent_ls.models.sdk_import import is_deferred
from agent_ls.ports.model import ModelError, ModelRequest
from agent_ls.ports.messages import Message, TextBlock
api = FakeAPI().start()
model = AnthropicModel("m", api_key="k", base_url=api.url)
request = ModelRequest(
    messages=[Message(role="user", content=[TextBlock("hi")])], system="s", tools=[]
)
def loaded():  # whose bodies ran
    return sorted(
        k for k, m in list(sys.modules.items()) if k.startswith("anthropic") and not is_deferred(m)
    )
async def turn():
    try:
        return [type(e).__name__ async for e in model.stream(request)]
    except ModelError as exc:
        return str(exc)
async def main():
    out = {}
    # `agent-ls run`'s worker: ready once imported; what follows runs while the server starts.
    await model.warm_then_rehearse(lambda: out.setdefault("at_ready", loaded()), lambda: False)
    out["warmed"] = loaded()
    api.enqueue(Turn(text="hello", tool_uses=[("read_file", {"path": "a.py"})]))
    out["events"] = await turn()
    out["streamed"] = loaded()
    api.enqueue(Fault.status(529, message="busy", error_type="overloaded_error"))
    out["error"] = await turn()
    out["after_error"] = loaded()
    return out
print(json.dumps(asyncio.run(main())))
"""


def test_the_first_request_waits_for_no_beta_type_nor_error_table() -> None:
    # The span helpers' module (beta Messages types) waits for its first call, which a stream
    # without a recording span never makes; the error table is run by the warm-up once the
    # SDK is ready, off the first request's path and off the event loop of the first error.
    out = _run(FIRST_REQUEST)
    at_ready, warmed, streamed = set(out["at_ready"]), set(out["warmed"]), set(out["streamed"])
    assert "anthropic._error_classes" not in at_ready
    assert "anthropic._error_classes" in warmed
    assert out["events"][0] == "UsageSoFar" and out["events"][-1] == "TurnComplete"
    assert "ToolUseStart" in out["events"]
    assert not {m for m in at_ready if m.startswith("anthropic.types.beta")}
    # (The error table imports the beta error types; not the beta Messages types.)
    beta_messages = {
        "anthropic.types.beta.message_create_params",
        "anthropic.types.beta.beta_message",
    }
    assert not streamed & beta_messages
    assert "anthropic.lib._tracing._api_call" not in streamed
    assert not {
        m for m in streamed if m.startswith(("anthropic.resources", "anthropic.lib.streaming"))
    }
    # ~190 modules of the SDK's ~3,500 (~1,360 through the Messages resource and its helper).
    assert len(at_ready) < 250, len(at_ready)
    # An error response is classified as it always was, and imports next to nothing then
    # (the table's 277 modules were run by the warm-up).
    assert "overloaded" in out["error"].lower() and "busy" in out["error"], out["error"]
    assert len(set(out["after_error"]) - streamed) < 5, set(out["after_error"]) - streamed


NAMES_OF = """
import importlib, json, sys, types
def names_of(packages):
    out = {}
    for name in packages:
        package = importlib.import_module(name)
        names = [n for n in dir(package) if not n.startswith("__")]
        modules = {n for n in names if isinstance(getattr(package, n), types.ModuleType)}
        out[name] = (sorted(set(names) - modules), sorted(modules))
    return out
"""
COMPARED = {
    "anthropic": ["anthropic", "anthropic.types", "anthropic.types.beta", "anthropic.resources"],
    "openai": ["openai", "openai.types", "openai.types.chat", "openai.resources"],
}


@per_sdk
def test_names_resolved_early_are_what_each_body_binds(sdk: Sdk) -> None:
    # Every re-export of every package, asked of the deferred package, is the very object the
    # package's body binds once it runs; then the packages hold what a plain import leaves.
    compared = COMPARED[sdk.name]
    plain = _run(
        NAMES_OF + f"import {sdk.name}\nprint(json.dumps({{'dirs': names_of({compared!r})}}))\n"
    )
    script = NAMES_OF + textwrap.dedent(
        f"""
        from agent_ls.models.{sdk.name} import defer_sdk_packages
        from agent_ls.models.sdk_import import is_deferred, load, reexports
        defer_sdk_packages()
        names = {sorted(_packages(sdk))!r}
        FORWARDED = {FORWARDED[sdk.name]!r}
        checked = mismatched = 0
        unusable, forwarded = [], []
        for name in names:
            package = importlib.import_module(name)
            if not is_deferred(package):
                continue  # a body that ran already (asked for by another package's code)
            with open(package.__spec__.origin, encoding="utf-8") as f:
                table = reexports(name, f.read())
            if table is None:
                continue  # runs whole when first asked
            try:
                early = {{n: getattr(package, n) for n in table}}
            except Exception:  # an optional part (openai.helpers wants numpy): so must the body
                try:
                    load(package)
                except Exception:
                    unusable.append(name)
                    continue
                raise AssertionError(name + ": a name failed early, yet the body runs")
            load(package)
            assert not is_deferred(package)
            for n, value in early.items():
                checked += 1
                bound = package.__dict__[n]
                if bound is not value and getattr(bound, "__name__", None) in FORWARDED.get(
                    getattr(bound, "__module__", None), ()
                ) and (value.__module__, value.__name__) == (bound.__module__, bound.__name__):
                    forwarded.append(name + "." + n)  # taken before its module ran: forwards
                    continue
                mismatched += bound is not value
        # A plain import made each submodule that some SDK code imports an attribute of its
        # package; a package loaded late imports a submodule when its name is asked for.
        unreachable = [
            (name, sub)
            for name, (_, subs) in {plain["dirs"]!r}.items()
            for sub in subs
            if not isinstance(getattr(importlib.import_module(name), sub, None), types.ModuleType)
        ]
        print(json.dumps({{
            "checked": checked, "mismatched": mismatched, "dirs": names_of({compared!r}),
            "unreachable": unreachable, "unusable": unusable, "forwarded": forwarded,
        }}))
        """
    )
    result = _run(script)
    assert result["checked"] > 1000
    assert result["mismatched"] == 0
    assert set(result["forwarded"]) <= {
        f"{m.rpartition('.')[0]}.{f}" for m, fs in FORWARDED[sdk.name].items() for f in fs
    }
    assert result["unreachable"] == []
    assert result["unusable"] == (["openai.helpers"] if sdk.name == "openai" else [])
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
    out = _run(script, str(tmp_path))
    assert out["wrong_version"] is False and out["installed"] is True
    assert out["after_import"] == []  # the package's body did not run
    assert out["after_A"] == ["a"]  # only the module A comes from
    assert out["A_is_a_A"] is True
    assert out["after_sub_leaf"] == ["a", "sub.leaf"]  # a submodule without its package's body
    assert out["sub_X"] == 1 and out["after_sub_X"] == ["a", "sub.leaf", "sub"]
    assert out["star"] == ["A", "C"] and out["deferred_after_all"] is False
    assert out["broken"] == ["ModuleNotFoundError", "ModuleNotFoundError"]  # each time
    assert "missing_name" in out["missing"]


def test_a_forwarded_function_runs_its_modules_body_at_its_first_call(tmp_path: Path) -> None:
    pkg = tmp_path / "fwd_sdk"
    pkg.mkdir()
    (tmp_path / "ran.py").write_text("order = []\n")
    (pkg / "_version.py").write_text('__version__ = "1.0"\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "heavy.py").write_text("import ran\nran.order.append('heavy')\nclass Heavy: pass\n")
    # What an SDK module that only its error path or tracing needs looks like.
    (pkg / "errors.py").write_text(
        "import ran\nfrom .heavy import Heavy\nran.order.append('errors')\n"
        "def make(x, *, twice=False):\n    return ('made', x * 2 if twice else x)\n"
        "def other():\n    return 'other'\n"
        "TABLE = {1: Heavy}\n"
    )
    (pkg / "client.py").write_text(
        "from .errors import make, gone\ndef fail(x):\n    return make(x, twice=True)\n"
    )
    (pkg / "broken.py").write_text(
        "import ran\nran.order.append('broken')\nraise RuntimeError('no')\n"
    )
    (pkg / "user.py").write_text("from .broken import f\n")
    script = """
        import json, sys
        sys.path.insert(0, sys.argv[1])
        from agent_ls.models.sdk_import import defer_package_bodies, is_deferred
        import ran
        defer_package_bodies(
            "fwd_sdk", version="1.0",
            forward={"fwd_sdk.errors": ("make", "gone"), "fwd_sdk.broken": ("f",)},
        )
        import fwd_sdk.client as client, fwd_sdk.errors as errors
        out = {"after_import": list(ran.order), "deferred": is_deferred(errors)}
        out["first_call"] = client.fail(2)
        out["after_call"] = list(ran.order)
        out["loaded"] = not is_deferred(errors)
        out["real_after"] = errors.make is not client.make and errors.make(3) == ("made", 3)
        out["second_call"] = client.fail(5)
        try:
            client.gone()
        except AttributeError as exc:
            out["gone"] = str(exc)
        ran.order.clear()
        import fwd_sdk.user as user
        errors_seen = []
        for _ in range(2):
            try:
                user.f()
            except RuntimeError as exc:
                errors_seen.append(str(exc))
        out["broken"] = errors_seen
        out["broken_runs"] = list(ran.order)
        print(json.dumps(out))
    """
    out = _run(script, str(tmp_path))
    assert out["after_import"] == []  # neither errors.py nor what it imports ran
    assert out["deferred"] is True
    assert out["first_call"] == ["made", 4]  # arguments and keywords reach the function
    assert out["after_call"] == ["heavy", "errors"]
    assert out["loaded"] is True and out["real_after"] is True
    assert out["second_call"] == ["made", 10]
    assert "'gone'" in out["gone"]  # a name the body does not define: no endless forwarding
    assert out["broken"] == ["no", "no"]  # a failing body fails each call, as an import would
    assert out["broken_runs"] == ["broken", "broken"]


def test_a_forwarded_module_is_loaded_by_any_other_name(tmp_path: Path) -> None:
    pkg = tmp_path / "fwd2_sdk"
    pkg.mkdir()
    (pkg / "_version.py").write_text('__version__ = "1.0"\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "errors.py").write_text(
        "__all__ = ['make', 'TABLE']\ndef make():\n    return 1\nTABLE = {'a': 1}\n"
    )
    script = """
        import json, sys
        sys.path.insert(0, sys.argv[1])
        from agent_ls.models.sdk_import import defer_package_bodies, is_deferred
        defer_package_bodies("fwd2_sdk", version="1.0", forward={"fwd2_sdk.errors": ("make",)})
        import fwd2_sdk.errors as errors
        out = {"has_path": hasattr(errors, "__path__"), "deferred": is_deferred(errors)}
        out["table"] = errors.TABLE
        out["loaded"] = not is_deferred(errors)
        ns = {}
        exec("from fwd2_sdk.errors import *", ns)
        out["star"] = sorted(k for k in ns if not k.startswith("__"))
        out["made"] = ns["make"]()
        out["class"] = type(errors).__name__
        print(json.dumps(out))
    """
    out = _run(script, str(tmp_path))
    assert out["has_path"] is False and out["deferred"] is True  # a `from` import's probe
    assert out["table"] == {"a": 1} and out["loaded"] is True
    assert out["star"] == ["TABLE", "make"] and out["made"] == 1
    assert out["class"] == "module"


def test_reexports_takes_type_aliases_as_the_bodys_own() -> None:
    source = textwrap.dedent(
        """
        from typing_extensions import TypeAlias
        from ._types import Event as Event, Model
        Alias: TypeAlias = Model[object]
        Either = Event | Model
        __all__ = ["Event"]
        """
    )
    assert reexports("pkg", source) == {
        "TypeAlias": None,
        "Event": ("pkg._types", "Event"),
        "Model": ("pkg._types", "Model"),
        "Alias": None,
        "Either": None,
    }
    for impure in ("X = make()", "X = A + B", "X = [A]", "X = y = A", "import os", "del A"):
        assert reexports("pkg", f"from ._t import A\n{impure}\n") is None, impure


def test_a_type_alias_runs_its_body_a_reexport_beside_it_does_not(tmp_path: Path) -> None:
    pkg = tmp_path / "alias_sdk"
    pkg.mkdir()
    (tmp_path / "ran.py").write_text("order = []\n")
    (pkg / "_version.py").write_text('__version__ = "1.0"\n')
    (pkg / "__init__.py").write_text(
        "from typing_extensions import TypeAlias\n"
        "from .a import A as A\nfrom .b import B as B\n"
        "Both: TypeAlias = tuple[A, B]\n"
    )
    for leaf in ("a", "b"):
        (pkg / f"{leaf}.py").write_text(
            f"import ran\nran.order.append({leaf!r})\nclass {leaf.upper()}: pass\n"
        )
    script = """
        import json, sys
        sys.path.insert(0, sys.argv[1])
        from agent_ls.models.sdk_import import defer_package_bodies, is_deferred
        import ran
        defer_package_bodies("alias_sdk", version="1.0")
        import alias_sdk
        out = {"A": alias_sdk.A.__name__, "after_A": list(ran.order)}
        out["deferred_after_A"] = is_deferred(alias_sdk)
        out["Both"] = repr(alias_sdk.Both)
        out["after_Both"] = list(ran.order)
        out["deferred_after_Both"] = is_deferred(alias_sdk)
        print(json.dumps(out))
    """
    out = _run(script, str(tmp_path))
    assert out["A"] == "A" and out["after_A"] == ["a"] and out["deferred_after_A"] is True
    assert out["Both"] == "tuple[alias_sdk.a.A, alias_sdk.b.B]"
    assert out["after_Both"] == ["a", "b"] and out["deferred_after_Both"] is False


READ_BODIES = """
import json, sys
from agent_ls.models import sdk_import
read = []
for name in ("reexports", "bound_names"):
    def counted(*args, _real=getattr(sdk_import, name)):
        read.append(1)
        return _real(*args)
    setattr(sdk_import, name, counted)
import asyncio
from agent_ls.models.{name} import {model}
# the model worker's warm-up, which keeps what it read once the SDK is ready
asyncio.run({model}("m", api_key="k").warm_then_rehearse(lambda: None, lambda: True))
loaded = sorted(k for k in sys.modules if k == "{name}" or k.startswith("{name}."))
print(json.dumps({{"read": len(read), "loaded": loaded}}))
"""


@per_sdk
def test_the_next_start_reads_no_package_body(sdk: Sdk, tmp_path: Path) -> None:
    # What the bodies were read to be is kept in the data dir: the next process loads the
    # same modules without parsing one body (~30 ms of anthropic's first request).
    script = READ_BODIES.format(name=sdk.name, model=MODELS[sdk.name])
    data = {"AGENT_LS_DATA_DIR": str(tmp_path)}
    first, second = _run(script, **data), _run(script, **data)
    assert first["read"] >= 5 and second["read"] == 0
    assert second["loaded"] == first["loaded"]
    kept = list((tmp_path / "cache").glob(f"sdk-import-{sdk.name}-{sdk.version}.json"))
    assert len(kept) == 1 and kept[0].stat().st_mode & 0o077 == 0


KEPT_DEMO = """
import json, sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from agent_ls.models import sdk_import
read = []
real = sdk_import.reexports
sdk_import.reexports = lambda *args: read.append(args[0]) or real(*args)
sdk_import.defer_package_bodies("kept_sdk", version="1.0", cache=Path(sys.argv[2]))
import kept_sdk
out = {"A": kept_sdk.A.__module__, "names": sorted(n for n in ("A", "B2") if hasattr(kept_sdk, n))}
sdk_import.save_analyses()
out["read"] = read
print(json.dumps(out))
"""


def test_kept_analyses_are_used_only_while_they_hold(tmp_path: Path) -> None:
    pkg = tmp_path / "kept_sdk"
    pkg.mkdir()
    (pkg / "_version.py").write_text('__version__ = "1.0"\n')
    (pkg / "__init__.py").write_text("from .a import A as A\n")
    (pkg / "a.py").write_text("class A: pass\n")
    (pkg / "b.py").write_text("class B: pass\n")
    cache = tmp_path / "cache" / "kept.json"

    def run() -> Any:
        return _run(KEPT_DEMO, str(tmp_path), str(cache))

    assert run() == {"A": "kept_sdk.a", "names": ["A"], "read": ["kept_sdk"]}
    assert run()["read"] == []  # kept
    # The body changed: its size and time no longer match, and it is read again.
    (pkg / "__init__.py").write_text("from .a import A as A\nfrom .b import B as B2\n")
    assert run() == {"A": "kept_sdk.a", "names": ["A", "B2"], "read": ["kept_sdk"]}
    assert run()["read"] == []
    # A file that is not what the hook writes, or names a module outside the package, is
    # not believed: the body is read and the file written anew.
    kept = json.loads(cache.read_text())
    kept["kept_sdk"]["table"]["A"] = ["os", "sep"]
    cache.write_text(json.dumps(kept))
    assert run() == {"A": "kept_sdk.a", "names": ["A", "B2"], "read": ["kept_sdk"]}
    stamp = kept["kept_sdk"]["stamp"]
    wrong_shapes = [
        {"kept_sdk": {"stamp": stamp, "table": [["A", ["kept_sdk.b", "B"]]], "bound": None}},
        {"kept_sdk": {"stamp": stamp, "table": None, "bound": "AB"}},
    ]
    for garbage in (
        "{not json",
        "[]",
        '{"kept_sdk": {"stamp": 1}}',
        *map(json.dumps, wrong_shapes),
    ):
        cache.write_text(garbage)
        assert run() == {"A": "kept_sdk.a", "names": ["A", "B2"], "read": ["kept_sdk"]}
        assert run()["read"] == []


@per_sdk
def test_eager_setting_turns_the_hook_off(sdk: Sdk) -> None:
    out = _run(
        "import json\n"
        "from agent_ls.models.sdk_import import defer_package_bodies\n"
        f"print(json.dumps(defer_package_bodies('{sdk.name}', version='{sdk.version}')))\n",
        AGENT_LS_EAGER_SDK="1",
    )
    assert out is False


@per_sdk
def test_the_sdks_own_logging_switch_gets_a_plain_import(sdk: Sdk) -> None:
    # ``ANTHROPIC_LOG``/``OPENAI_LOG`` is read by the top package's body, which must then run.
    script = WARMED.format(name=sdk.name, model=MODELS[sdk.name])
    loaded = set(_run(script, **{f"{sdk.name.upper()}_LOG": "info"}))
    assert UNUSED[sdk.name][0] in loaded


@per_sdk
def test_the_canned_warm_up_stream_runs_through_the_async_client(sdk: Sdk) -> None:
    # It fails quietly (the real request reports real problems), so a test says it works:
    # in memory, no network, the async stream classes the real requests use (anthropic's
    # gathers the final message: the canned tool input is parsed, with jiter, at its end).
    stream_module = {
        "anthropic": "jiter",
        "openai": "openai.resources.chat.completions.completions",
    }[sdk.name]
    out = _run(
        "import json, sys\n"
        f"from agent_ls.models.{sdk.name} import _prewarm_stream\n"
        "ok = _prewarm_stream()\n"
        f"print(json.dumps([ok, {stream_module!r} in sys.modules]))\n"
    )
    assert out == [True, True]
