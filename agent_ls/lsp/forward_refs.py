"""pygls's converter with lsprotocol's forward references resolved per class, on first use.

Making the converter, lsprotocol resolves the string annotations of all ~560 of its classes
(``attrs.resolve_types``, ~20 ms of every server start), though a server converts a few dozen
of them before its first answer. :func:`lazily_resolving_converter` makes pygls's converter
without that pass, and resolves a class (with ``attrs.resolve_types``, in lsprotocol's
namespace, as the pass would) the first time the converter is asked for its structure or
unstructure function: before lsprotocol's own function factories read its fields. A union's
disambiguation asks for its members' functions first (cattrs' default), so they are resolved
then too. The one field type lsprotocol reads while registering its hooks is resolved before.
A converter made another way (a client's, in the same process) still resolves everything.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import cattrs

# The class whose field type lsprotocol reads while registering its hooks (NotebookSelector).
_READ_AT_REGISTRATION = ("NotebookCellTextDocumentFilter",)


def lazily_resolving_converter(make: Callable[[], cattrs.Converter]) -> cattrs.Converter:
    """The converter ``make`` returns (pygls's ``default_converter``), lsprotocol's classes
    resolved as it first needs each."""
    from lsprotocol import _hooks
    from lsprotocol import types as lsp_types

    namespace: dict[str, Any] = lsp_types.ALL_TYPES_MAP
    for name in _READ_AT_REGISTRATION:
        attrs.resolve_types(namespace[name], namespace, {})
    done = _hooks._resolved_forward_references
    _hooks._resolved_forward_references = True  # the eager pass, skipped for this one
    try:
        converter = make()
    finally:
        _hooks._resolved_forward_references = done

    def pending(cls: Any) -> bool:
        return (
            isinstance(cls, type)
            and cls.__module__ == lsp_types.__name__
            and attrs.has(cls)
            and cls.__dict__.get("__attrs_types_resolved__") is not cls
        )

    def structure(cls: type) -> Any:
        attrs.resolve_types(cls, namespace, {})
        return converter.get_structure_hook(cls)  # now lsprotocol's factory's

    def unstructure(cls: type) -> Any:
        attrs.resolve_types(cls, namespace, {})
        return converter.get_unstructure_hook(cls)

    converter.register_structure_hook_factory(pending, structure)
    converter.register_unstructure_hook_factory(pending, unstructure)
    return converter
