"""Importing a large SDK without running the bodies of its packages before they are used.

``import anthropic`` (2.14) loads about 3,500 modules and builds 1,500 pydantic models, over a
second of CPU, because each package's ``__init__`` re-exports everything below it: the first
request needs the client, the Messages resource and its types, not Bedrock, Vertex or the
beta resources. :func:`defer_package_bodies` installs an import hook for one pinned SDK under
which a package's ``__init__`` does not run at its import, somewhat as Mercurial's
demandimport does, but for package bodies only: every module that is not a package is
executed at its import as usual, so an ``ImportError`` still surfaces where the SDK expects it.

A name asked of a deferred package is found where its body would have found it: a name the
body re-exports (``from .message import Message as Message``) is taken from the module it
names, imported alone; a submodule's name the body does not bind imports the submodule;
anything else runs the body. A body is read (not run) for its re-exports only when it consists
of relative ``from`` imports, ``__all__``, its docstring, names imported from ``typing`` and
type aliases (``BetaTextEvent: TypeAlias = ParsedBetaTextEvent``: names, attributes,
subscripts and ``|`` of them, nothing called); an alias is made by running the body when it is
first asked for, not when a re-export beside it is. Any other body runs the first time a name
it binds is asked for. Where a body binds a submodule's name to something else
(``from .vertex import vertex``), the submodule does not become the package's attribute when
it is imported: the name keeps answering what the body binds.

That is sound when re-exporting is all a body does (nothing changes but when, and whether, the
rest of it is imported), so the hook is installed for one SDK version whose packages a test
has checked (``tests/test_sdk_import.py``); any other installed version imports as usual.
``AGENT_LS_EAGER_SDK=1`` turns the hook off. It serves ``anthropic`` and ``openai``.

A few plain modules can be deferred too (``forward=``), each with the functions it defines
that its importers only call: until a call, or any other name of the module, needs its body,
they get a forwarder that runs the body and calls the function it defined. ``anthropic``'s
OpenTelemetry span helpers (called only when a span records) import the beta Messages types,
and its table of error classes (used on an error response) every error type: ~300 ms of the
first request's CPU between them.

Reading the bodies (``ast``) takes ~30 ms of the first request's path for ``anthropic``; what
they were read to be is kept in a JSON file in the data dir (``cache=``), each package under
its ``__init__``'s size and modification time, and read from there by the next process.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import threading
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_lock = threading.RLock()  # one body runs at a time, and a second thread waits for it
_installed: set[str] = set()
# package -> {name: (module, attribute or None for the module itself), or None when the body
# makes it (a type alias)}; None for the package: its body does more than that.
Table = dict[str, tuple[str, str | None] | None]
_TYPING = frozenset({"typing", "typing_extensions"})


@dataclass(frozen=True)
class Analysis:
    """What a package body is: the names it re-exports (None: it does more), and then the
    names it binds (None: unknown; nothing is taken early)."""

    table: Table | None
    bound: frozenset[str] | None


_analyses: dict[str, Analysis] = {}  # package -> what its body is, read in this process


def defer_package_bodies(
    package: str,
    *,
    version: str,
    exclude: Sequence[str] = (),
    cache: Path | None = None,
    forward: Mapping[str, Sequence[str]] | None = None,
) -> bool:
    """Defer the ``__init__`` of ``package`` and of its subpackages (but those under an
    ``exclude`` prefix) until a name of theirs is first used; True when the hook is in place.

    Nothing happens when ``package`` is imported already, when the installed version is not
    ``version`` (its packages were not checked), or when ``AGENT_LS_EAGER_SDK`` is set.
    ``cache``: the file that keeps what the bodies were read to be (:func:`save_analyses`).
    ``forward``: plain modules of ``package`` whose bodies are deferred too, each with the
    functions (defined by ``def`` in its body) that are forwarders until the body runs.
    """
    with _lock:
        if package in _installed:
            return True
        if package in sys.modules or os.environ.get("AGENT_LS_EAGER_SDK"):
            return False
        if installed_version(package) != version:
            return False
        if cache is not None:
            _stores[package] = _Store(cache, package)
        forwarded = {name: tuple(functions) for name, functions in (forward or {}).items()}
        sys.meta_path.insert(0, _Finder(package, tuple(exclude), forwarded))
        _installed.add(package)
        return True


def analysis_cache(package: str, version: str) -> Path:
    """Where the analyses of ``package`` at ``version`` are kept: the data dir's cache."""
    from agent_ls.dirs import data_dir

    return data_dir() / "cache" / f"sdk-import-{package}-{version}.json"


def save_analyses() -> None:
    """Write the bodies read in this process, if any, to their package's cache file (best
    effort: a file that cannot be written is read anew next time)."""
    with _lock:
        for store in _stores.values():
            store.save()


def load_deferred(names: Sequence[str]) -> None:
    """Run now the bodies of those modules ``names`` that were imported and are deferred
    (blocking: for a thread, once no request waits for them). A body that fails stays
    deferred: its first use raises, where the SDK expects it."""
    for name in names:
        module = sys.modules.get(name)
        if module is not None:
            with contextlib.suppress(Exception):
                load(module)


def installed_version(package: str) -> str | None:
    """``__version__`` as the package's ``_version.py`` writes it, read without importing."""
    spec = importlib.machinery.PathFinder.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        try:
            with open(os.path.join(folder, "_version.py"), encoding="utf-8") as f:
                text = f.read()
        except OSError:
            continue
        found = re.search(r"""^__version__\s*=\s*["']([^"']+)["']""", text, re.MULTILINE)
        return found.group(1) if found else None
    return None


def is_deferred(module: types.ModuleType) -> bool:
    """Whether ``module``'s body has not run yet."""
    return type(module) in (_DeferredPackage, _DeferredModule)


def load(module: types.ModuleType) -> None:
    """Run a deferred package's (or module's) body now (nothing if it ran)."""
    with _lock:
        spec = module.__spec__
        deferred = type(module)
        if deferred not in (_DeferredPackage, _DeferredModule) or spec is None:
            return
        loader = spec.loader
        assert isinstance(loader, _DeferringLoader)
        real = loader.real
        # Loaded first: names the body asks of its own module while it runs are looked up as
        # in any partly initialised module.
        _set_class(module, _LoadedPackage if deferred is _DeferredPackage else types.ModuleType)
        spec.loader = module.__loader__ = real
        try:
            real.exec_module(module)
        except BaseException:
            # Deferred again: the next use runs the body again and raises again, instead of
            # finding a half-initialised module.
            spec.loader = module.__loader__ = loader
            _set_class(module, deferred)
            raise


def _set_class(module: types.ModuleType, kind: type[types.ModuleType]) -> None:
    module.__class__ = kind


def reexports(package: str, source: str) -> Table | None:
    """What the body ``source`` of ``package`` binds, by name: ``(module, attribute)``, the
    attribute None when the name is the module, or None when the body makes it (a type
    alias, a name from ``typing``); None when the body does more than that."""
    names: Table = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "__future__":
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module in _TYPING:
            names.update((a.asname or a.name, None) for a in node.names if a.name != "*")
            continue
        made = _type_alias(node)
        if made is not None:
            names[made] = None
            continue
        if not isinstance(node, ast.ImportFrom) or node.level == 0:
            return None
        base = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
        for alias in node.names:
            if alias.name == "*":
                return None
            bound = alias.asname or alias.name
            if node.module is None:  # from . import x: the submodule
                names[bound] = (f"{base}.{alias.name}", None)
            else:
                names[bound] = (base, alias.name)
    return names


def _type_alias(node: ast.stmt) -> str | None:
    """The name ``node`` binds when it is a type alias (``X = A[B] | C``, ``X: T = ...``):
    one name, a value that only names, subscripts and joins with ``|`` (nothing called)."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    else:
        return None
    if not isinstance(target, ast.Name) or target.id == "__all__":
        return None
    for part in ast.walk(value):
        if isinstance(part, ast.BinOp) and not isinstance(part.op, ast.BitOr):
            return None
        if not isinstance(
            part, ast.Name | ast.Attribute | ast.Subscript | ast.Tuple | ast.Constant | ast.BinOp
        ) and not isinstance(part, ast.expr_context | ast.BitOr):
            return None
    return target.id


def bound_names(source: str) -> frozenset[str]:
    """The names a body binds at module level (in top-level ``if``/``try`` blocks too)."""
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                names.update(a.asname or a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.For):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.If | ast.Try | ast.With):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))

    visit(ast.parse(source).body)
    return frozenset(names)


def _source_of(module: types.ModuleType) -> str | None:
    origin = module.__spec__.origin if module.__spec__ else None
    try:
        with open(origin or "", encoding="utf-8") as f:
            return f.read()
    except OSError:
        return None


def _analysis(module: types.ModuleType) -> Analysis:
    name = module.__name__
    with _lock:
        found = _analyses.get(name)
        if found is None:
            origin = module.__spec__.origin if module.__spec__ else None
            store = _stores.get(name.partition(".")[0]) if origin else None
            found = store.get(name, origin) if store and origin else None
            if found is None:
                found = _analyse(name, _source_of(module))
                if store and origin:
                    store.put(name, origin, found)
            _analyses[name] = found
        return found


def _analyse(package: str, source: str | None) -> Analysis:
    """What the body ``source`` of ``package`` is (None: unreadable)."""
    if source is None:
        return Analysis(None, None)
    try:
        table = reexports(package, source)
    except (SyntaxError, ValueError, ImportError):
        table = None
    if table is not None:
        return Analysis(table, None)
    try:
        return Analysis(None, bound_names(source))
    except SyntaxError:
        return Analysis(None, None)


def _reexports_of(module: types.ModuleType) -> Table | None:
    return _analysis(module).table


def _bound_by(module: types.ModuleType) -> frozenset[str] | None:
    """The names an impure body binds; None when unknown (then nothing is taken early)."""
    return _analysis(module).bound


class _Store:
    """The analyses an earlier process made of one SDK's package bodies, in a JSON file: each
    under the size and modification time of the ``__init__`` it read, and used only while
    those match."""

    def __init__(self, path: Path, package: str) -> None:
        self.path, self.package = path, package
        self._entries: dict[str, Any] | None = None
        self._new: dict[str, Any] = {}

    def get(self, name: str, origin: str) -> Analysis | None:
        entry = self._load().get(name)
        if not isinstance(entry, dict) or entry.get("stamp") != _stamp(origin):
            return None
        try:
            return self._decode(entry)
        except (TypeError, ValueError, KeyError):
            return None  # not what this module writes: read the body

    def put(self, name: str, origin: str, analysis: Analysis) -> None:
        stamp = _stamp(origin)
        if stamp is None:
            return
        table = analysis.table
        self._new[name] = {
            "stamp": stamp,
            "table": None if table is None else {k: v and list(v) for k, v in table.items()},
            "bound": None if analysis.bound is None else sorted(analysis.bound),
        }

    def save(self) -> None:
        if not self._new:
            return
        entries = {**self._load(), **self._new}
        self._new = {}
        self._entries = entries
        import tempfile

        with contextlib.suppress(OSError):
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=self.path.name)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump(entries, out)
                os.replace(temporary, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise

    def _load(self) -> dict[str, Any]:
        if self._entries is None:
            try:
                loaded = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                loaded = None
            self._entries = loaded if isinstance(loaded, dict) else {}
        return self._entries

    def _decode(self, entry: dict[str, Any]) -> Analysis:
        raw_table, raw_bound = entry["table"], entry["bound"]
        if not isinstance(raw_table, dict | None) or not isinstance(raw_bound, list | None):
            raise TypeError("table or bound")
        table: Table | None = None
        if raw_table is not None:
            table = {}
            for key, value in raw_table.items():
                if value is None:
                    table[str(key)] = None
                    continue
                module, attribute = value
                if not isinstance(module, str) or not isinstance(attribute, str | None):
                    raise TypeError(module)
                if not (module == self.package or module.startswith(self.package + ".")):
                    raise ValueError(f"{module} is not in {self.package}")
                table[str(key)] = (module, attribute)
        if raw_bound is not None and not all(isinstance(n, str) for n in raw_bound):
            raise TypeError("bound")
        bound = None if raw_bound is None else frozenset(raw_bound)
        return Analysis(table, bound)


def _stamp(path: str) -> list[int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return [info.st_size, info.st_mtime_ns]


_stores: dict[str, _Store] = {}  # top package -> its analyses' file


class _DeferredPackage(types.ModuleType):
    """A package whose body has not run. A name its body re-exports comes from the module it
    names; a submodule's name that the body does not bind imports the submodule; anything
    else runs the body first."""

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("__"):
            table = _reexports_of(self)
            entry = table.get(name) if table is not None else None
            if entry is not None:
                source, attribute = entry
                value: Any = importlib.import_module(source)
                if attribute is not None:
                    value = getattr(value, attribute)
                setattr(self, name, value)
                return value
            # A body may bind a submodule's name to something else (``from .x import x``,
            # ``_client = None``): then the body answers.
            bound = set(table) if table is not None else _bound_by(self)
            if bound is not None and name not in bound:
                submodule = _submodule(self, name)
                if submodule is not None:
                    return submodule
        load(self)
        if is_deferred(self):  # no spec to run it from
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        # Now a loaded package: found as in any module (its own ``__getattr__`` included).
        return getattr(self, name)

    def __setattr__(self, name: str, value: Any) -> None:
        # Importing a submodule makes it an attribute of its package; a body that binds that
        # name to something else (``from .x import x``) would have overwritten it once it ran.
        # Not stored, the name goes on to the body's binding (``__getattr__``).
        if (
            isinstance(value, types.ModuleType)
            and value.__name__ == f"{self.__name__}.{name}"
            and _rebinds(self, name)
        ):
            return
        super().__setattr__(name, value)

    def __dir__(self) -> list[str]:
        load(self)
        return sorted(self.__dict__)


def _rebinds(package: types.ModuleType, name: str) -> bool:
    """Whether the body of ``package`` binds ``name`` to something else than its submodule."""
    table = _reexports_of(package)
    if table is not None:
        return name in table and table[name] != (f"{package.__name__}.{name}", None)
    bound = _bound_by(package)
    return bound is None or name in bound


def _submodule(package: types.ModuleType, name: str) -> types.ModuleType | None:
    """``package.name`` imported, when it is a submodule (found or already imported)."""
    spec = package.__spec__
    if name.startswith("__") or spec is None or spec.submodule_search_locations is None:
        return None
    full = f"{spec.name}.{name}"
    if full in sys.modules:
        return sys.modules[full]
    if importlib.machinery.PathFinder.find_spec(full, spec.submodule_search_locations) is None:
        return None
    return importlib.import_module(full)


class _LoadedPackage(types.ModuleType):
    """A package whose body ran late. A plain import would have imported some submodules
    (for code that uses them) and so made them attributes of their package: here a
    submodule's name imports it when it is first asked for."""

    def __getattr__(self, name: str) -> Any:
        found = _submodule(self, name)
        if found is None:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return found


class _DeferredModule(types.ModuleType):
    """A plain module whose body has not run: only its forwarders are there (they run it
    when called); any other name runs it first."""

    def __getattr__(self, name: str) -> Any:
        if name == "__path__":  # asked by every ``from`` import of it: a module has none
            raise AttributeError(name)
        load(self)
        if is_deferred(self):  # no spec to run it from
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}")
        return getattr(self, name)

    def __dir__(self) -> list[str]:
        load(self)
        return sorted(self.__dict__)


def _forwarder(module: types.ModuleType, name: str) -> Any:
    """What ``module.name`` is until the body runs: the function the body defines, called
    once the body has run."""

    def forward(*args: Any, **kwargs: Any) -> Any:
        load(module)
        function = module.__dict__.get(name)
        if function is forward or function is None:  # the body does not define it
            raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
        return function(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    forward.__module__ = module.__name__
    forward.__doc__ = f"``{module.__name__}.{name}``, whose module is imported at the first call."
    return forward


class _DeferringLoader(importlib.abc.Loader):
    """Creates the module as the real loader would, and leaves its body for later: a
    package's, or a plain module's with ``forwarded`` functions."""

    def __init__(
        self, real: importlib.abc.Loader, forwarded: tuple[str, ...] | None = None
    ) -> None:
        self.real, self.forwarded = real, forwarded

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        if self.forwarded is None:
            _set_class(module, _DeferredPackage)
            return
        _set_class(module, _DeferredModule)
        for name in self.forwarded:
            module.__dict__[name] = _forwarder(module, name)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, get_filename, ...
        return getattr(self.real, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(
        self, package: str, exclude: tuple[str, ...], forward: dict[str, tuple[str, ...]]
    ) -> None:
        self.package, self.exclude, self.forward = package, exclude, forward

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.package and not fullname.startswith(self.package + "."):
            return None
        if any(fullname == e or fullname.startswith(e + ".") for e in self.exclude):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return spec
        if spec.submodule_search_locations is not None:
            spec.loader = _DeferringLoader(spec.loader)
        elif fullname in self.forward:
            spec.loader = _DeferringLoader(spec.loader, self.forward[fullname])
        return spec  # any other module: imported as usual
