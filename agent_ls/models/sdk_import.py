"""Importing a large SDK without running the bodies of its packages before they are used.

``import anthropic`` (2.14) loads about 3,500 modules and builds 1,500 pydantic models, over a
second of CPU, because each package's ``__init__`` re-exports everything below it: the first
request needs the client, the Messages resource and its types, not Bedrock, Vertex or the
beta resources. :func:`defer_package_bodies` installs an import hook for one pinned SDK under
which a package's ``__init__`` does not run at its import, somewhat as Mercurial's
demandimport does, but for package bodies only: every module that is not a package is
executed at its import as usual, so an ``ImportError`` still surfaces where the SDK expects it.

A name asked of a deferred package is found where its body would have found it: a submodule
is imported; a name the body re-exports (``from .message import Message as Message``) is
taken from the module it names, imported alone; anything else runs the body. A body is read
(not run) for its re-exports only when it consists of relative ``from`` imports, ``__all__``
and its docstring; any other body runs the first time a name of its is asked for.

That is sound when re-exporting is all a body does (nothing changes but when, and whether, the
rest of it is imported), so the hook is installed for one SDK version whose packages a test
has checked (``tests/test_sdk_import.py``); any other installed version imports as usual.
``AGENT_LS_EAGER_SDK=1`` turns the hook off.
"""

from __future__ import annotations

import ast
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import re
import sys
import threading
import types
from collections.abc import Sequence
from typing import Any

_lock = threading.RLock()  # one body runs at a time, and a second thread waits for it
_installed: set[str] = set()
# package -> {name: (module, attribute or None for the module itself)}; None: not re-exports
_reexports: dict[str, dict[str, tuple[str, str | None]] | None] = {}


def defer_package_bodies(package: str, *, version: str, exclude: Sequence[str] = ()) -> bool:
    """Defer the ``__init__`` of ``package`` and of its subpackages (but those under an
    ``exclude`` prefix) until a name of theirs is first used; True when the hook is in place.

    Nothing happens when ``package`` is imported already, when the installed version is not
    ``version`` (its packages were not checked), or when ``AGENT_LS_EAGER_SDK`` is set.
    """
    with _lock:
        if package in _installed:
            return True
        if package in sys.modules or os.environ.get("AGENT_LS_EAGER_SDK"):
            return False
        if installed_version(package) != version:
            return False
        sys.meta_path.insert(0, _Finder(package, tuple(exclude)))
        _installed.add(package)
        return True


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
    return type(module) is _DeferredPackage


def load(module: types.ModuleType) -> None:
    """Run a deferred package's body now (nothing if it ran)."""
    with _lock:
        spec = module.__spec__
        if type(module) is not _DeferredPackage or spec is None:
            return
        loader = spec.loader
        assert isinstance(loader, _DeferringLoader)
        real = loader.real
        # A loaded package first: names the body asks of its own package while it runs are
        # looked up as in any partly initialised module.
        _set_class(module, _LoadedPackage)
        spec.loader = module.__loader__ = real
        try:
            real.exec_module(module)
        except BaseException:
            # Deferred again: the next use runs the body again and raises again, instead of
            # finding a half-initialised package.
            spec.loader = module.__loader__ = loader
            _set_class(module, _DeferredPackage)
            raise


def _set_class(module: types.ModuleType, kind: type[types.ModuleType]) -> None:
    module.__class__ = kind


def reexports(package: str, source: str) -> dict[str, tuple[str, str | None]] | None:
    """What the body ``source`` of ``package`` binds, by name: ``(module, attribute)``, the
    attribute None when the name is the module; None when the body does more than re-export."""
    names: dict[str, tuple[str, str | None]] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the docstring
        if isinstance(node, ast.Assign) and all(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            continue
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "__future__":
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


def _reexports_of(module: types.ModuleType) -> dict[str, tuple[str, str | None]] | None:
    name = module.__name__
    with _lock:
        if name not in _reexports:
            origin = module.__spec__.origin if module.__spec__ else None
            try:
                with open(origin or "", encoding="utf-8") as f:
                    _reexports[name] = reexports(name, f.read())
            except (OSError, SyntaxError, ValueError, ImportError):
                _reexports[name] = None
        return _reexports[name]


class _DeferredPackage(types.ModuleType):
    """A package whose body has not run: its submodules import as usual, a name its body
    re-exports comes from the module it names, anything else runs the body first."""

    def __getattr__(self, name: str) -> Any:
        submodule = _submodule(self, name)
        if submodule is not None:
            return submodule
        if not name.startswith("__"):
            table = _reexports_of(self)
            if table is not None and name in table:
                source, attribute = table[name]
                value = importlib.import_module(source)
                if attribute is not None:
                    value = getattr(value, attribute)
                setattr(self, name, value)
                return value
        load(self)
        try:
            return self.__dict__[name]
        except KeyError:
            raise AttributeError(f"module {self.__name__!r} has no attribute {name!r}") from None

    def __dir__(self) -> list[str]:
        load(self)
        return sorted(self.__dict__)


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


class _DeferringLoader(importlib.abc.Loader):
    """Creates the package module as the real loader would, and leaves its body for later."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        _set_class(module, _DeferredPackage)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, get_filename, ...
        return getattr(self.real, name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, package: str, exclude: tuple[str, ...]) -> None:
        self.package, self.exclude = package, exclude

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.package and not fullname.startswith(self.package + "."):
            return None
        if any(fullname == e or fullname.startswith(e + ".") for e in self.exclude):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if (
            spec is None
            or spec.submodule_search_locations is None  # not a package: imported as usual
            or not isinstance(spec.loader, importlib.machinery.SourceFileLoader)
        ):
            return spec
        spec.loader = _DeferringLoader(spec.loader)
        return spec
