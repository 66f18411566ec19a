"""pygls's converter with lsprotocol's forward references resolved on first use
(``agent_ls.lsp.forward_refs``), checked against pygls's own converter: for every lsprotocol
class, the same generated (un)structure functions, the same field types, the same results.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = r"""
import json, linecache, sys
import attrs
from lsprotocol import types
from pygls.protocol import default_converter
lazy = sys.argv[1] == "lazy"
if lazy:
    from agent_ls.lsp.forward_refs import lazily_resolving_converter
    converter = lazily_resolving_converter(default_converter)
else:
    converter = default_converter()
classes = sorted(
    (name, cls) for name, cls in types.ALL_TYPES_MAP.items()
    if isinstance(cls, type) and attrs.has(cls)
)
def resolved():
    return sum(cls.__dict__.get("__attrs_types_resolved__") is cls for _, cls in classes)
at_start = resolved()

def name_of(value):
    code = getattr(value, "__code__", None)
    if code is not None and code.co_filename.startswith("<cattrs generated"):
        return code.co_filename  # a generated function: the class and kind it was made for
    if isinstance(value, type) or callable(value) and hasattr(value, "__code__"):
        return getattr(value, "__qualname__", None) or repr(value)
    return repr(value)  # a type the handler is given (typing's repr names what it holds)

def source(hook):
    code = getattr(hook, "__code__", None)
    if code is None or not code.co_filename.startswith("<cattrs generated"):
        return name_of(hook)
    # The text, and what each name it calls stands for (a field's handler is a global).
    bound = sorted(
        f"{k}={name_of(v)}" for k, v in hook.__globals__.items() if k.startswith("__c")
    )
    return "".join(linecache.getlines(code.co_filename)) + "\n".join(bound)

# A session's first messages, in the server's order, then every class.
params = converter.structure({
    "processId": 1, "rootUri": "file:///w",
    "capabilities": {"workspace": {"workspaceEdit": {"documentChanges": True}},
                     "window": {"workDoneProgress": True},
                     "textDocument": {"publishDiagnostics": {"relatedInformation": True}}},
    "initializationOptions": {"a": 1},
}, types.InitializeParams)
result = converter.unstructure(types.InitializeResult(
    capabilities=types.ServerCapabilities(
        text_document_sync=types.TextDocumentSyncKind.Incremental,
        execute_command_provider=types.ExecuteCommandOptions(commands=["agent.ask"]),
        code_action_provider=types.CodeActionOptions(code_action_kinds=["quickfix"]),
    ),
    server_info=types.ServerInfo(name="agent-ls", version="1"),
))
edit = converter.structure({"changes": {"file:///w/a.py": [
    {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
     "newText": "x"}]}}, types.WorkspaceEdit)
after_session = resolved()
def hook_source(get, cls):
    try:
        return source(get(cls))
    except Exception as exc:  # a class pygls cannot convert either (some unions)
        return f"{type(exc).__name__}: {exc}"

hooks = {}
for name, cls in classes:
    hooks[name] = [hook_source(converter.get_unstructure_hook, cls),
                   hook_source(converter.get_structure_hook, cls)]
fields = {name: [(a.name, repr(a.type)) for a in attrs.fields(cls)] for name, cls in classes}
print(json.dumps({
    "hooks": hooks, "fields": fields, "classes": len(classes),
    "behaviour": [repr(params), result, repr(edit)],
    "resolved": [at_start, after_session, resolved()],
}))
"""


def probe(mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, object]]:
    return {mode: probe(mode) for mode in ("pygls", "lazy")}


def test_every_class_converts_as_with_pygls_own_converter(
    runs: dict[str, dict[str, object]],
) -> None:
    pygls, lazy = runs["pygls"], runs["lazy"]
    assert lazy["classes"] == pygls["classes"] and pygls["classes"] > 500  # type: ignore[operator]
    assert lazy["behaviour"] == pygls["behaviour"]
    assert lazy["fields"] == pygls["fields"]
    differing = [n for n in pygls["hooks"] if lazy["hooks"][n] != pygls["hooks"][n]]  # type: ignore[attr-defined,index]
    assert not differing, differing[:5]
    generated = [h for pair in pygls["hooks"].values() for h in pair if "def " in h]  # type: ignore[attr-defined]
    assert len(generated) > 500  # the comparison covers cattrs' generated code


def test_a_session_resolves_only_the_classes_it_converts(
    runs: dict[str, dict[str, object]],
) -> None:
    at_start, after_session, at_end = runs["lazy"]["resolved"]  # type: ignore[misc]
    classes = runs["lazy"]["classes"]
    assert at_start < 5  # only what lsprotocol reads while registering its hooks
    assert after_session < 150  # the first messages' classes and their fields'
    assert at_end == classes  # every class, once asked for
    assert runs["pygls"]["resolved"] == [classes, classes, classes]
