"""lsprotocol's classes rebuilt from a recording of what attrs made of them.

``lsprotocol.types`` hands ~550 class bodies to ``attrs.define``. Even with their methods'
code cached (:mod:`agent_ls.codecache`), the decorator takes ~130 ms of every server
start deciding, for each class, what to generate, writing its source again and copying the
module's namespace into each script's globals: the same answer every time for the same
lsprotocol and attrs. While :func:`attrs_replay` is active, the first start lets attrs build
each class and records what it made beyond the class body: the compiled methods script and the
globals its code reads, where each method goes, the class's properties. It then rebuilds the
class from that recording, from the same body, and keeps the recording only where the two
classes are the same (same members in the same order, same code, same globals read, same
closures, same fields). Later starts rebuild each class from the recording, with attrs' own
pieces where they are cheap (its fields, attribute tuple, pickling and ``__setattr__``
closures): the module imports in ~120 ms instead of ~165 ms.

The recording is keyed by the identity (path, size, mtime) of the module's file and of
``attr/_make.py`` and ``attr/__init__.py``: an upgrade of either package records again
(another Python has another file). A class whose body no longer matches its recording
(field names, its own members) is left to attrs. Anything unreadable is ignored and
rewritten.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import linecache
import logging
import os
import sys
import types
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from typing import Any

from agent_ls import codecache
from agent_ls.codecache import FUTURE_FLAGS, read_marshal, write_marshal

log = logging.getLogger(__name__)

MODULE = "lsprotocol.types"
FORMAT = 3

# A recorded class: its field names, the names its body defines besides the fields, the
# methods script (text, file name, code), where each function of the script goes, the globals
# its code reads, the ``__init__`` annotations' names, and the class properties.
Recipe = tuple[Any, ...]


@dataclass
class ReplayStats:
    """What one use of the recording did (for tests and the log)."""

    replayed: int = 0
    built: int = 0  # by attrs: not in the recording, or not matching it
    recorded: int = 0
    mismatched: list[str] = field(default_factory=list)  # recorded by attrs, not reproduced
    written: bool = False


def default_path() -> Path:
    """The recording in the data dir (``AGENT_LS_DATA_DIR``), one per bytecode version."""
    from agent_ls.dirs import data_dir

    return data_dir() / "cache" / f"attrs-replay-{MAGIC_NUMBER.hex()}.marshal"


@contextlib.contextmanager
def lsprotocol_from_caches() -> Iterator[ReplayStats]:
    """While the block imports ``lsprotocol.types``, its classes are rebuilt from the
    recording in the data dir, and what attrs still compiles (pygls' own classes, a class
    the recording lacks) comes from the code cache, when it is installed."""
    cover_attrs()
    with attrs_replay(default_path()) as stats:
        yield stats


def cover_attrs() -> bool:
    """attrs compiles the methods it writes through the code cache (:mod:`agent_ls.codecache`)
    from now on: for lsprotocol's classes, ~150 ms of a start without the recording."""
    try:
        import attr._make as make
    except ImportError:
        return False
    compile_and_eval = getattr(make, "_compile_and_eval", None)
    return callable(compile_and_eval) and codecache.cover(make, "compile", compile_and_eval)


@contextlib.contextmanager
def attrs_replay(path: Path, module: str = MODULE) -> Iterator[ReplayStats]:
    """While the block runs (it imports ``module``), ``attrs.define`` rebuilds the module's
    classes from the recording at ``path``, and records those it had to build."""
    stats = ReplayStats()
    try:
        import attr
        import attr._make as make
        import attr._next_gen
        import attrs
    except ImportError:
        yield stats
        return
    key = _key(make, module)
    real_define = attrs.define
    if key is None or real_define is not attr._next_gen.define:
        yield stats  # someone else wraps define
        return
    known = _load(path, key)
    recorder = _Recorder(make)

    def define(*args: Any, **options: Any) -> Any:
        cls = args[0] if len(args) == 1 else None
        if options or not isinstance(cls, type) or cls.__module__ != module:
            return real_define(*args, **options)
        recipe = known.get(cls.__qualname__)
        if recipe is not None:
            try:
                built = _replay(make, cls, recipe)
            except Exception as exc:  # a recording it cannot follow: attrs builds the class
                log.debug("not replaying %s: %r", cls.__qualname__, exc)
                built = None
            if built is not None:
                stats.replayed += 1
                return built
        stats.built += 1
        return recorder.record(cls, real_define, stats)

    attrs.define = define
    try:
        yield stats
    finally:
        if attrs.define is define:
            attrs.define = real_define
    if recorder.recipes:
        stats.written = write_marshal(path, (key, {**known, **recorder.recipes}), RECORDING)
    log.debug(
        "attrs replay: %d replayed, %d built by attrs, %d recorded",
        stats.replayed,
        stats.built,
        stats.recorded,
    )


def _key(make: types.ModuleType, module: str) -> tuple[Any, ...] | None:
    """What the recording depends on: the module's file and attrs' (``attr/_make.py`` and the
    package's ``__init__``: an upgrade rewrites both). Not ``attr.__version__``: reading it
    imports ``importlib.metadata`` and parses attrs' metadata, ~20 ms of the server's start."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(module)
        origin = None if spec is None else spec.origin
        attr_init = getattr(sys.modules.get("attr"), "__file__", None)
        if origin is None or make.__file__ is None or attr_init is None:
            return None
        stamps = []
        for file in (origin, make.__file__, attr_init):
            stat = os.stat(file)
            stamps.append((file, stat.st_size, stat.st_mtime_ns))
    except (OSError, ImportError, ValueError):
        return None
    return (FORMAT, module, tuple(stamps))


RECORDING = "attrs replay recording"


def _load(path: Path, key: tuple[Any, ...]) -> dict[str, Recipe]:
    stored = read_marshal(path, RECORDING)
    if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key):
        return {}
    recipes = stored[1]
    return recipes if isinstance(recipes, dict) else {}


class _Mismatch(Exception):
    """The class body is not the one recorded, or the recording cannot be followed."""


def _own_names(cls: type, fields: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(k for k in cls.__dict__ if k not in fields)


def _attributes(make: types.ModuleType, cls: type) -> Any:
    """The fields ``attrs.define`` finds in ``cls``: every annotated name, in order."""
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - as attrs reads them
    body = cls.__dict__
    counting = make._CountingAttr
    from_counting = make.Attribute.from_counting_attr
    default_alias = make._default_init_alias_for
    set_ = object.__setattr__
    found = []
    for name, annotation in annotations.items():
        value = body.get(name, make.NOTHING)
        if value.__class__ is not counting:
            value = make.attrib(value)
        attribute = from_counting(name, value, False, annotation)
        if not attribute.alias:
            set_(attribute, "alias", default_alias(name))
            set_(attribute, "alias_is_default", True)
        found.append(attribute)
    return found


# What a recorded global or property value is: a field's own object, or a module's name.
def _encode(value: Any, attributes: Any, make: types.ModuleType) -> tuple[Any, ...]:
    by_name = {a.name: a for a in attributes}
    if value is None or isinstance(value, (bool, int, str)):
        return ("literal", value)
    if (
        isinstance(value, dict)
        and value.keys() == by_name.keys()
        and all(value[k] is by_name[k] for k in value)
    ):
        return ("attr_dict",)
    for a in attributes:
        if value is a:
            return ("attribute", a.name)
        if value is a.validator:
            return ("validator", a.name)
        if a.converter is not None and value is a.converter:
            return ("converter", a.name)
    if isinstance(value, enum.Enum):
        owner = type(value)
        holder = make.ClassProps
        for attr_name in ("Hashability", "KeywordOnly"):
            if getattr(holder, attr_name, None) is owner:
                return ("classprops_enum", attr_name, value.name)
    named = _module_names(make)
    found = named.get(id(value))
    if found is not None:
        return ("module", *found)
    # attrs hands its init scripts a fresh `object.__setattr__.__get__` for each class
    if isinstance(value, types.MethodWrapperType) and value.__name__ == "__get__":
        found = named.get(id(getattr(value, "__self__", None)))
        if found is not None:
            return ("module_get", *found)
    raise _Mismatch(f"cannot record {value!r}")


_NAMED: dict[int, tuple[str, str]] = {}


def _module_names(make: types.ModuleType) -> dict[int, tuple[str, str]]:
    """What attr._make and the builtins name, by object identity (first name wins)."""
    if not _NAMED:
        import builtins

        for module in (make, builtins):
            for name, value in vars(module).items():
                _NAMED.setdefault(id(value), (module.__name__, name))
    return _NAMED


def _decode(code: tuple[Any, ...], by_name: dict[str, Any], make: types.ModuleType) -> Any:
    kind = code[0]
    if kind == "literal":
        return code[1]
    if kind == "attr_dict":
        return dict(by_name)
    if kind == "attribute":
        return by_name[code[1]]
    if kind == "validator":
        return by_name[code[1]].validator
    if kind == "converter":
        return by_name[code[1]].converter
    if kind == "classprops_enum":
        return getattr(getattr(make.ClassProps, code[1]), code[2])
    if kind == "module":
        return getattr(sys.modules[code[1]], code[2])
    if kind == "module_get":
        return getattr(sys.modules[code[1]], code[2]).__get__
    raise _Mismatch(f"unknown recorded value {code!r}")


def _code_names(code: types.CodeType) -> frozenset[str]:
    """The global (and attribute) names ``code`` and the functions it defines read."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return frozenset(names)


def _props_slots(make: types.ModuleType) -> tuple[str, ...]:
    return tuple(make.ClassProps.__slots__)


class _Recorder:
    """Lets attrs build a class, captures its methods script, and derives a recipe."""

    def __init__(self, make: types.ModuleType) -> None:
        self.make = make
        self.recipes: dict[str, Recipe] = {}
        self._scripts: list[tuple[str, str, dict[str, Any]]] = []

    def record(self, cls: type, real_define: Callable[..., Any], stats: ReplayStats) -> Any:
        make = self.make
        original = make._linecache_and_compile
        scripts = self._scripts
        scripts.clear()

        def capture(
            script: str, filename: str, globs: dict[str, Any], *args: Any, **kwargs: Any
        ) -> Any:
            scripts.append((script, filename, globs))
            return original(script, filename, globs, *args, **kwargs)

        body_names = tuple(cls.__dict__)
        # Compiled past the code cache: the recording keeps this code, and no later start
        # would read the cache's copy (~550 entries, ~1 MB each start loads before it forks).
        cached_compile = vars(make).pop("compile", None)
        setattr(make, "_linecache_and_compile", capture)  # noqa: B010 - mypy: private name
        try:
            built = real_define(cls)
        finally:
            setattr(make, "_linecache_and_compile", original)  # noqa: B010
            if cached_compile is not None:
                setattr(make, "compile", cached_compile)  # noqa: B010
        try:
            recipe = self._recipe(cls, built, body_names)
        except Exception as exc:  # whatever it is, the class stays attrs' own
            log.debug("not recording %s: %s", cls.__qualname__, exc)
            return built
        # Rebuild from the same body with the recipe; keep it only if that is the same class.
        marker = cls.__dict__.get("__attrs_base_of_slotted__")
        with contextlib.suppress(AttributeError):
            del cls.__attrs_base_of_slotted__  # type: ignore[attr-defined]
        try:
            again = _replay(make, cls, recipe)
            differences = [] if again is None else class_differences(again, built)
        except Exception as exc:  # not reproduced: not recorded
            again, differences = None, [repr(exc)]
        finally:
            if marker is not None:
                cls.__attrs_base_of_slotted__ = marker  # type: ignore[attr-defined]
        if again is None or differences:
            stats.mismatched.append(cls.__qualname__)
            log.debug("not recording %s: %s", cls.__qualname__, differences[:3])
            return built
        self.recipes[cls.__qualname__] = recipe
        stats.recorded += 1
        return built

    def _recipe(self, cls: type, built: Any, body_names: tuple[str, ...]) -> Recipe:
        make = self.make
        if cls.__bases__ != (object,) or type(cls) is not type:
            raise _Mismatch("has bases or a metaclass")
        if len(self._scripts) != 1:
            raise _Mismatch(f"{len(self._scripts)} method scripts")
        script, filename, globs = self._scripts[0]
        attributes = built.__attrs_attrs__
        fields = tuple(a.name for a in attributes)
        if fields != tuple(cls.__dict__.get("__annotations__", {})):  # noqa: RUF063
            raise _Mismatch("fields are not the annotated names")
        own = tuple(k for k in body_names if k not in fields)
        # The code attrs ran, compiled as attrs does (past the code cache, as in record()).
        flags = make._compile_and_eval.__code__.co_flags & FUTURE_FLAGS
        code = compile(script, filename, "exec", flags, True)
        reads = sorted(_code_names(code) & globs.keys())
        global_codes = tuple((name, _encode(globs[name], attributes, make)) for name in reads)
        defined = {const.co_name for const in code.co_consts if isinstance(const, types.CodeType)}
        attach = tuple(
            (key, value.__name__)
            for key, value in built.__dict__.items()
            if isinstance(value, types.FunctionType)
            and value.__name__ in defined
            and value.__code__.co_filename == filename
        )
        init_annotations: tuple[str, ...] = ()
        if any(key == "__init__" for key, _ in attach):
            annotations = built.__dict__["__init__"].__annotations__
            by_alias = {a.alias: a for a in attributes}
            for name, value in annotations.items():
                expected = None if name == "return" else getattr(by_alias.get(name), "type", _NO)
                if value is not expected:
                    raise _Mismatch(f"__init__ annotation {name}")
            init_annotations = tuple(annotations)
        props = built.__dict__["__attrs_props__"]
        prop_codes = tuple(
            _encode(getattr(props, slot), attributes, make) for slot in _props_slots(make)
        )
        return (
            fields,
            own,
            script,
            filename,
            code,
            attach,
            global_codes,
            init_annotations,
            prop_codes,
        )


_NO = object()


def _replay(make: types.ModuleType, cls: type, recipe: Recipe) -> Any:
    """``cls`` as attrs would build it, following ``recipe``; None when the body differs.

    The steps and their order are ``attrs.define``'s for a slotted, mutable class without
    bases; attrs' own builder makes the pickling and ``__setattr__`` closures, and the slotted
    class is made as its ``_create_slots_class`` makes it for such a class."""
    (
        fields,
        own,
        script,
        filename,
        code,
        attach,
        global_codes,
        init_annotations,
        prop_codes,
    ) = recipe
    if cls.__bases__ != (object,) or type(cls) is not type:
        return None
    attributes = _attributes(make, cls)
    if tuple(a.name for a in attributes) != fields or _own_names(cls, fields) != own:
        return None
    by_name = {a.name: a for a in attributes}
    attrs_tuple = make._make_attr_tuple_class(cls.__name__, list(fields))(attributes)

    props = make.ClassProps.__new__(make.ClassProps)
    for slot, value in zip(_props_slots(make), _props_values(prop_codes, make), strict=True):
        object.__setattr__(props, slot, value)
    if props.is_frozen or props.is_exception or not props.is_slotted or props.added_str:
        raise _Mismatch("class properties outside the recorded kind")
    if props.added_ordering or props.field_transformer is not None:
        raise _Mismatch("class properties outside the recorded kind")
    if props.hashability not in (
        make.ClassProps.Hashability.UNHASHABLE,
        make.ClassProps.Hashability.LEAVE_ALONE,
    ):
        raise _Mismatch("class properties outside the recorded kind")
    if not props.has_weakref_slot or "__slots__" in cls.__dict__:
        raise _Mismatch("class properties outside the recorded kind")

    builder = make._ClassBuilder.__new__(make._ClassBuilder)
    # What the builder methods used below read (verified against attrs when recorded)
    builder._cls = cls
    builder._cls_dict = cls_dict = dict(cls.__dict__)
    builder._attrs = attrs_tuple
    builder._attr_names = fields
    builder._cache_hash = False
    builder._on_setattr = props.on_setattr_hook
    builder._has_custom_setattr = "__setattr__" in cls.__dict__
    builder._wrote_own_setattr = False
    builder._add_method_dunders = builder._add_method_dunders_unsafe
    if builder._on_setattr is not None and not any(
        a.validator is not None or a.converter is not None for a in attributes
    ):
        builder._on_setattr = None  # as _ClassBuilder does when nothing converts or validates
    cls_dict["__attrs_attrs__"] = attrs_tuple
    cls_dict["__attrs_props__"] = props
    if props.added_pickling:
        cls_dict["__getstate__"], cls_dict["__setstate__"] = builder._make_getstate_setstate()
    if props.added_eq:
        cls_dict["__ne__"] = make.__ne__
    builder.add_setattr()
    if props.hashability is make.ClassProps.Hashability.UNHASHABLE:
        builder.make_unhashable()
    if make.PY_3_13_PLUS and "__replace__" not in cls.__dict__:
        builder.add_replace()
    if props.added_match_args and "__match_args__" not in cls.__dict__:
        builder.add_match_args()

    # The methods script, run as attrs runs it: its functions land in their own namespace.
    globs = {name: _decode(value_code, by_name, make) for name, value_code in global_codes}
    namespace: dict[str, Any] = {}
    exec(code, globs, namespace)
    linecache.cache[filename] = (len(script), None, script.splitlines(True), filename)
    by_alias = {a.alias: a for a in attributes}
    for key, local in attach:
        method = namespace[local]
        if key == "__init__":
            method.__annotations__ = {
                name: None if name == "return" else by_alias[name].type for name in init_annotations
            }
        cls_dict[key] = builder._add_method_dunders(method)
    built = _slotted_class(builder, cls, cls_dict, fields, own)
    cls.__attrs_base_of_slotted__ = weakref.ref(built)  # type: ignore[attr-defined]
    return built


_PROPS: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _props_values(prop_codes: tuple[Any, ...], make: types.ModuleType) -> tuple[Any, ...]:
    """The class properties' values (none depends on the fields: decoded once)."""
    values = _PROPS.get(prop_codes)
    if values is None:
        values = _PROPS[prop_codes] = tuple(_decode(c, {}, make) for c in prop_codes)
    return values


def _slotted_class(
    builder: Any, cls: type, cls_dict: dict[str, Any], fields: tuple[str, ...], own: tuple[str, ...]
) -> Any:
    """attrs' ``_create_slots_class`` for a class without bases, slots of its own or cached
    properties, with a ``__weakref__`` slot. ``own``: the body's names besides the fields,
    the only members that can be a cached property or hold the class in a closure (what
    attrs adds holds neither: its methods script defines plain functions, and its pickling
    and ``__setattr__`` closures hold field names and hooks)."""
    body_members = cls.__dict__
    cached = functools.cached_property
    for name in own:
        if isinstance(body_members[name], cached):
            raise _Mismatch("a cached property")  # attrs writes a __getattr__ for it
    skip = {*fields, "__dict__", "__weakref__"}
    body = {k: v for k, v in cls_dict.items() if k not in skip}
    if not builder._wrote_own_setattr:
        body["__attrs_own_setattr__"] = False
    body["__slots__"] = (*fields, "__weakref__")
    body["__qualname__"] = cls.__qualname__
    built = type(cls)(cls.__name__, cls.__bases__, body)
    # A method that names `__class__` (or calls super()) holds the class it was defined in.
    members = built.__dict__
    for name in own:
        item = members.get(name)
        if isinstance(item, (classmethod, staticmethod)):
            cells = getattr(item.__func__, "__closure__", None)
        elif isinstance(item, property):
            cells = getattr(item.fget, "__closure__", None)
        else:
            cells = getattr(item, "__closure__", None)
        for cell in cells or ():
            try:
                match = cell.cell_contents is cls
            except ValueError:  # an empty cell
                continue
            if match:
                cell.cell_contents = built
    return built


def class_differences(mine: type, theirs: type) -> list[str]:
    """Where two classes built from the same body differ (empty: the same class)."""
    out: list[str] = []
    for name in ("__name__", "__qualname__", "__module__", "__doc__", "__bases__"):
        if getattr(mine, name) != getattr(theirs, name):
            out.append(name)
    if type(mine) is not type(theirs):
        out.append("metaclass")
    mine_dict, their_dict = dict(mine.__dict__), dict(theirs.__dict__)
    if list(mine_dict) != list(their_dict):
        out.append(f"members {list(mine_dict)} != {list(their_dict)}")
        return out
    for key, value in their_dict.items():
        if not _same_member(key, mine_dict[key], value):
            out.append(key)
    return out


def _same_value(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


def _same_member(key: str, mine: Any, theirs: Any) -> bool:
    if isinstance(theirs, types.FunctionType):
        return isinstance(mine, types.FunctionType) and _same_function(mine, theirs)
    if key == "__attrs_attrs__":
        return (
            type(mine).__name__ == type(theirs).__name__
            and list(vars(type(mine))) == list(vars(type(theirs)))
            and tuple(mine) == tuple(theirs)
        )
    if key == "__attrs_props__":
        slots = type(theirs).__slots__
        return type(mine) is type(theirs) and all(
            _same_value(getattr(mine, s), getattr(theirs, s)) for s in slots
        )
    if isinstance(theirs, (types.MemberDescriptorType, types.GetSetDescriptorType)):
        return type(mine) is type(theirs) and mine.__name__ == theirs.__name__
    return _same_value(mine, theirs)


def _same_function(mine: types.FunctionType, theirs: types.FunctionType) -> bool:
    if mine is theirs:
        return True
    for name in ("__code__", "__name__", "__qualname__", "__module__", "__doc__"):
        if getattr(mine, name) != getattr(theirs, name):
            return False
    if not _same_sequence(mine.__defaults__, theirs.__defaults__):
        return False
    if (mine.__kwdefaults__ or {}) != (theirs.__kwdefaults__ or {}):
        return False
    if mine.__annotations__ != theirs.__annotations__:
        return False
    import builtins

    missing = object()
    fallback = vars(builtins)
    mine_globals, their_globals = mine.__globals__, theirs.__globals__
    for name in _code_names(theirs.__code__):
        a = mine_globals[name] if name in mine_globals else fallback.get(name, missing)
        b = their_globals[name] if name in their_globals else fallback.get(name, missing)
        if not _same_value(a, b):
            return False
    cells_a = [c.cell_contents for c in mine.__closure__ or ()]
    cells_b = [c.cell_contents for c in theirs.__closure__ or ()]
    return _same_sequence(tuple(cells_a), tuple(cells_b))


def _same_sequence(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b, strict=True))
