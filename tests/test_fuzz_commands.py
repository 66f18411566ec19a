"""Random JSON thrown at every command: the server answers each with a result or a clean error
(no traceback sent) and stays up."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_ls.lsp.protocol import COMMANDS
from tests.rawclient import RawClient

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=12,
)
keys = st.sampled_from(
    ["prompt", "uri", "range", "sessionId", "diagnostics", "mode", "start", "end", "line"]
)
plausible_objects = st.dictionaries(keys, json_values, max_size=4)
arguments = st.one_of(
    st.just(None),
    st.lists(json_values, max_size=3),
    st.lists(plausible_objects, min_size=1, max_size=1),
    json_values,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawClient]:
    root = tmp_path_factory.mktemp("fuzz-ws")
    script = root.parent / "fuzz-script.json"
    script.write_text(json.dumps({"turns": []}))
    data = tmp_path_factory.mktemp("fuzz-data")
    client = RawClient(
        root, env={"AGENT_LS_MODEL": f"script:{script}", "AGENT_LS_DATA_DIR": str(data)}
    )
    client.initialize(root)
    yield client
    client.close()


def check_response(response: dict[str, Any]) -> None:
    assert ("result" in response) != ("error" in response), response
    if "error" in response:
        error = response["error"]
        assert error["code"] in (-32602, -32603, -32803, -32601, -32600), error
        assert "Traceback" not in json.dumps(error)
        assert "traceback" not in (error.get("data") or {}), error
        assert error["message"]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(command=st.sampled_from([*COMMANDS, "agent.bogus"]), args=arguments)
def test_random_arguments_get_clean_answers(server: RawClient, command: str, args: Any) -> None:
    params: dict[str, Any] = {"command": command}
    if args is not None:
        params["arguments"] = args
    check_response(server.request("workspace/executeCommand", params))
    alive = server.request(
        "workspace/executeCommand", {"command": "agent.status", "arguments": [{}]}
    )
    assert "result" in alive, alive


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        "text",
        {"command": 5},
        {"command": "agent.ask", "arguments": {"prompt": "not a list"}},
        {"command": "agent.ask", "arguments": [{"prompt": "x" * 2_000_000}]},
    ],
)
def test_malformed_execute_command_params(server: RawClient, params: Any) -> None:
    response = server.request("workspace/executeCommand", params)
    # Each is a bad request: answered (not dropped) with invalid params, without a traceback.
    assert response.get("error", {}).get("code") == -32602, response
    assert "Traceback" not in json.dumps(response["error"])
    alive = server.request(
        "workspace/executeCommand", {"command": "agent.status", "arguments": [{}]}
    )
    assert "result" in alive
