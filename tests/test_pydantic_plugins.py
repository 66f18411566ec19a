"""agent-ls's processes build their pydantic models without looking for pydantic plugins.

Each probe is a fresh interpreter; a plugin is installed the way a user's environment would
have it (a distribution with a ``pydantic`` entry point), so the control shows pydantic does
load it, and ``leave_out`` shows it no longer does (nor imports ``importlib.metadata``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pydantic

from agent_ls import pydantic_plugins
from tests.probes import run_json

PROBE = r"""
import json, sys
if sys.argv[1] == "leave-out":
    from agent_ls import pydantic_plugins
    pydantic_plugins.leave_out()
from pydantic import BaseModel, ValidationError
import seen_plugin

class Point(BaseModel):
    x: int

ok = Point(x="3").x
try:
    Point(x="three")
    rejected = False
except ValidationError:
    rejected = True
print(json.dumps({"ok": ok, "rejected": rejected, "plugin saw": seen_plugin.SEEN,
                  "metadata imported": "importlib.metadata" in sys.modules}))
"""

PLUGIN = '''
SEEN = []

class Plugin:
    def new_schema_validator(self, schema, schema_type, schema_type_path, schema_kind,
                             config, plugin_settings):
        SEEN.append(schema_type_path.name)
        return None, None, None

plugin = Plugin()
'''


def _install_plugin(site: Path) -> None:
    (site / "seen_plugin.py").write_text(PLUGIN)
    info = site / "seen_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: seen-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[pydantic]\nseen = seen_plugin:plugin\n")


def test_a_users_plugin_is_loaded_by_pydantic_but_not_in_agent_ls(tmp_path: Path) -> None:
    _install_plugin(tmp_path)
    root = str(Path(__file__).resolve().parent.parent)
    control = run_json(PROBE, "control", path=[str(tmp_path), root])
    assert control == {
        "ok": 3,
        "rejected": True,
        "plugin saw": ["Point"],
        "metadata imported": True,
    }
    left_out = run_json(PROBE, "leave-out", path=[str(tmp_path), root])
    assert left_out == {"ok": 3, "rejected": True, "plugin saw": [], "metadata imported": False}


def test_the_stand_in_has_every_name_pydantic_takes_from_its_loader() -> None:
    taken: set[str] = set()
    for path in Path(pydantic.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            relative = node.level == 1 and node.module == "_loader" and path.parent.name == "plugin"
            if relative or node.module == pydantic_plugins.LOADER:
                taken.update(alias.name for alias in node.names)
    assert taken == {"get_plugins"}  # a new name here needs a stand-in in pydantic_plugins


def test_a_loader_already_imported_is_left_alone() -> None:
    probe = r"""
import json, sys
import pydantic.plugin._loader as real
from agent_ls import pydantic_plugins
pydantic_plugins.leave_out()
print(json.dumps({"same": sys.modules[pydantic_plugins.LOADER] is real}))
"""
    root = str(Path(__file__).resolve().parent.parent)
    assert run_json(probe, path=[root]) == {"same": True}
