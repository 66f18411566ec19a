"""bench/peerfake.py: each agent's turn comes from its own request, whatever else it sends."""

from __future__ import annotations

from bench.peerfake import choose


def _body(tools: list[str], assistants: int, system: str = "") -> dict[str, object]:
    messages: list[dict[str, object]] = [{"role": "user", "content": "fix it"}]
    for _ in range(assistants):
        messages += [{"role": "assistant", "content": "…"}, {"role": "user", "content": "…"}]
    return {"tools": [{"name": t} for t in tools], "messages": messages, "system": system}


def test_agent_ls_turns_follow_its_history() -> None:
    tools = ["read_file", "edit_file", "run_shell"]
    main, turn, first = choose(_body(tools, 0))
    assert main and turn == 0 and first["tool_uses"][0][0] == "read_file"
    _, turn, second = choose(_body(tools, 1))
    assert turn == 1 and second["tool_uses"][0][0] == "edit_file"
    _, _, last = choose(_body(tools, 2))
    assert "tool_uses" not in last and last["text"]


def test_claude_code_gets_absolute_paths_from_its_working_directory() -> None:
    system = [{"type": "text", "text": "Env:\nPrimary working directory: /ws/a\nPlatform: linux"}]
    main, _, turn = choose(_body(["Read", "Edit", "Bash"], 1, system))  # type: ignore[arg-type]
    assert main and turn["tool_uses"][0] == [
        "Edit",
        {"file_path": "/ws/a/calc.py", "old_string": "return a - b", "new_string": "return a + b"},
    ]


def test_side_requests_do_not_take_a_turn() -> None:
    main, _, answer = choose({"messages": [{"role": "user", "content": "a title please"}]})
    assert not main and answer == {"text": "ok"}
