"""Tool input schemas from the data dir's cache (``agent_ls.tools.schemas``).

Checked against pydantic itself: the schema a later start reads is the one pydantic makes of
the model, and it is read without building the model; an edited model is computed again.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agent_ls.tools import schemas
from agent_ls.tools.registry import default_tools
from agent_ls.tools.task import TaskTool
from tests.probes import UNREADABLE, run_json

ROOT = str(Path(__file__).resolve().parent.parent)

PROBE = r"""
import json, sys
from pathlib import Path
from agent_ls.tools import schemas
schemas.use(Path(sys.argv[1]))
from agent_ls.tools.registry import default_tools
from agent_ls.tools.task import TaskTool
tools = [*default_tools().all(), TaskTool([])]
specs = {t.name: t.spec().input_schema for t in tools}
built = sorted(t.name for t in tools if t.input_model.__pydantic_complete__)
pydantic_own = {t.name: t.input_model.model_json_schema() for t in tools}
print(json.dumps({"specs": specs, "built": built, "pydantic": pydantic_own}))
"""


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path) -> Any:
    schemas.use(tmp_path / "schemas.marshal")
    yield
    schemas.use(None)


def test_a_later_start_reads_pydantics_schemas_without_building_the_models(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "cache" / "tool-schemas.marshal")
    first = run_json(PROBE, path, path=[ROOT])
    assert first["specs"] == first["pydantic"]
    assert len(first["specs"]) == 8  # type: ignore[arg-type]  # the seven and task
    second = run_json(PROBE, path, path=[ROOT])
    assert second["built"] == []  # read from the cache: no model built before its first call
    assert second["specs"] == second["pydantic"] == first["pydantic"]


def test_a_deferred_model_validates_at_its_first_call() -> None:
    tools = {t.name: t for t in default_tools().all()}
    read = tools["read_file"]
    assert read.parse({"file_path": "a.py", "offset": 2}).offset == 2  # type: ignore[attr-defined]
    with pytest.raises(ValidationError):
        read.parse({"file_path": "a.py", "limit": 0})
    with pytest.raises(ValidationError):
        TaskTool([]).parse({"description": "x", "prompt": "y", "extra": 1})


def _model_module(folder: Path, description: str) -> type[BaseModel]:
    (folder / "stamped_tool_input.py").write_text(
        "from pydantic import BaseModel, ConfigDict, Field\n"
        "class StampedInput(BaseModel):\n"
        "    model_config = ConfigDict(defer_build=True)\n"
        f"    path: str = Field(description={description!r})\n",
        encoding="utf-8",
    )
    sys.modules.pop("stamped_tool_input", None)
    importlib.invalidate_caches()
    module = importlib.import_module("stamped_tool_input")
    model: type[BaseModel] = module.StampedInput
    return model


def test_an_edited_model_is_computed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "src"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    try:
        old = _model_module(folder, "where")
        assert schemas.input_schema(old)["properties"]["path"]["description"] == "where"
        schemas.use(tmp_path / "schemas.marshal")  # a new process, the same file
        new = _model_module(folder, "which file, now")
        assert new.model_json_schema()["properties"]["path"]["description"] == "which file, now"
        assert schemas.input_schema(new) == new.model_json_schema()
    finally:
        sys.modules.pop("stamped_tool_input", None)


@pytest.mark.parametrize("content", list(UNREADABLE.values()), ids=list(UNREADABLE))
def test_an_unreadable_cache_is_ignored_and_rewritten(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "unreadable.marshal"
    path.write_bytes(content)
    schemas.use(path)
    tools = default_tools().all()
    assert [t.spec().input_schema for t in tools] == [
        t.input_model.model_json_schema() for t in tools
    ]
    assert path.read_bytes() != content
    schemas.use(path)
    assert [t.spec().input_schema for t in tools] == [
        t.input_model.model_json_schema() for t in tools
    ]


def test_each_returned_schema_is_the_callers_own() -> None:
    read = next(t for t in default_tools().all() if t.name == "read_file")
    first = read.spec().input_schema
    first["properties"].clear()
    assert read.spec().input_schema == read.input_model.model_json_schema()


def test_the_cached_models_read_only_names_of_their_own_module() -> None:
    # The stamp is the defining file's: a field type or constant from another module would
    # change the schema without changing the stamp.
    tools = [*default_tools().all(), TaskTool([])]
    allowed = {"BaseModel", "ConfigDict", "Field", "str", "int", "bool", "None", "float"}
    for tool in tools:
        model = tool.input_model
        module = sys.modules[model.__module__]
        tree = ast.parse(Path(str(module.__file__)).read_text(encoding="utf-8"))
        imported = {
            alias.asname or alias.name.split(".")[0]
            for node in tree.body
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for alias in node.names
        }
        body = next(
            n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == model.__name__
        )
        used = {n.id for n in ast.walk(body) if isinstance(n, ast.Name)}
        assert (used & imported) <= allowed, (model.__name__, used & imported - allowed)
        assert model.__bases__ == (BaseModel,), model.__name__
