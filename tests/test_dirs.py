"""Where agent-ls keeps its files: platformdirs' answer, found without importing it on Linux."""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import pytest

from agent_ls import dirs
from tests.probes import run_json

ENVIRONMENTS = [
    {"HOME": "/home/ada"},
    {"HOME": "/home/ada/"},
    {"HOME": "/"},
    {"HOME": "/home/ada", "XDG_DATA_HOME": "/xdg/data", "XDG_CONFIG_HOME": "/xdg/config"},
    {"HOME": "/home/ada", "XDG_DATA_HOME": "/xdg/data/", "XDG_CONFIG_HOME": "/xdg//config"},
    {"HOME": "/home/ada", "XDG_DATA_HOME": "relative", "XDG_CONFIG_HOME": "~/config"},
    {"HOME": "/home/ada", "XDG_DATA_HOME": "", "XDG_CONFIG_HOME": " /x"},
    {"HOME": "relative/home"},
    {"HOME": ""},
    {"XDG_DATA_HOME": "/xdg/data", "XDG_CONFIG_HOME": "/xdg/config"},
    {"HOME": "/home/ada", "ANDROID_DATA": "/data", "ANDROID_ROOT": "/system"},
]
VARIABLES = (
    "HOME",
    "XDG_DATA_HOME",
    "XDG_CONFIG_HOME",
    "ANDROID_DATA",
    "ANDROID_ROOT",
    "AGENT_LS_DATA_DIR",
    "AGENT_LS_CONFIG_DIR",
)


@pytest.mark.parametrize("env", ENVIRONMENTS, ids=lambda env: repr(env))
def test_the_directories_are_platformdirs_own(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        data = platformdirs.user_data_dir("agent-ls", appauthor=False)
        config = platformdirs.user_config_dir("agent-ls", appauthor=False)
    except RuntimeError:  # no home platformdirs can find: agent-ls's answer is its error too
        with pytest.raises(RuntimeError):
            dirs.data_dir()
        return
    assert dirs.data_dir() == Path(data)
    assert dirs.user_config_dir() == Path(config)


def test_the_overrides_win(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_LS_DATA_DIR", str(tmp_path / "d"))
    monkeypatch.setenv("AGENT_LS_CONFIG_DIR", str(tmp_path / "c"))
    assert (dirs.data_dir(), dirs.user_config_dir()) == (tmp_path / "d", tmp_path / "c")


@pytest.mark.skipif(sys.platform != "linux", reason="the Linux answer is the one found by hand")
def test_on_linux_finding_them_imports_no_platformdirs() -> None:
    probe = r"""
import json, sys
from agent_ls import dirs
found = [str(dirs.data_dir()), str(dirs.user_config_dir())]
print(json.dumps({"found": found, "imported": sorted(
    m for m in ("platformdirs", "tempfile", "shutil") if m in sys.modules)}))
"""
    env = {
        "HOME": "/home/ada",
        "XDG_DATA_HOME": "",
        "XDG_CONFIG_HOME": "/xdg/config",
        "AGENT_LS_DATA_DIR": "",
        "AGENT_LS_CONFIG_DIR": "",
    }
    assert run_json(probe, env=env, path=[str(Path(__file__).resolve().parent.parent)]) == {
        "found": ["/home/ada/.local/share/agent-ls", "/xdg/config/agent-ls"],
        "imported": [],
    }
