"""``agent-ls acp`` with the real anthropic SDK against the fake API, driven by the
agent-client-protocol package's client: what the model is sent, and cancel then load."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import acp
import pytest
from acp.schema import EmbeddedResourceContentBlock, TextResourceContents

from tests.acp_harness import RecordingClient, acp_agent, agent_env, wait_until
from tests.fakeapi import FakeAPI, Turn

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def api() -> Iterator[Any]:
    with FakeAPI() as fake:
        yield fake


def sdk_env(tmp_path: Path, api: Any) -> dict[str, str]:
    return agent_env(
        tmp_path / "data",
        AGENT_LS_MODEL="anthropic:claude-sonnet-5-5",
        ANTHROPIC_BASE_URL=api.url,
        ANTHROPIC_API_KEY="test-key",
    )


def user_text(body: dict[str, Any]) -> str:
    parts = []
    for message in body["messages"]:
        if message["role"] != "user":
            continue
        content = message["content"]
        if isinstance(content, str):
            parts.append(content)
        else:
            parts.extend(b.get("text", "") for b in content if b.get("type") == "text")
    return "\n".join(parts)


async def test_prompt_permission_cancel_and_load_over_the_sdk(
    tmp_path: Path, workspace: Path, api: Any
) -> None:
    notes = workspace / "notes.md"
    api.enqueue(
        Turn(
            text="Editing the notes.",
            tool_uses=[
                (
                    "edit_file",
                    {"file_path": "notes.md", "old_string": "nothing yet", "new_string": "done"},
                )
            ],
        ),
        Turn(text="Noted."),
        Turn(text="A slow answer " * 40, chunk_delay=0.05),
    )
    env = sdk_env(tmp_path, api)
    client = RecordingClient()
    async with acp_agent(client, env) as (conn, _proc):
        new = await conn.new_session(cwd=str(workspace), mcp_servers=[])
        unsaved = notes.read_text() + "an unsaved line\n"
        client.buffers[str(notes)] = unsaved
        prompt = [
            acp.text_block("Update"),
            EmbeddedResourceContentBlock(
                type="resource",
                resource=TextResourceContents(uri=f"file://{notes}", text=unsaved),
            ),
        ]
        answer = await conn.prompt(session_id=new.session_id, prompt=prompt)
        assert answer.stop_reason == "end_turn"
        assert answer.field_meta["agentLs"]["usage"]["outputTokens"] > 0
        # The model read the words and the attached (unsaved) text, numbered.
        first = api.requests[0].body
        assert "Update @notes.md" in user_text(first)
        assert "an unsaved line" in user_text(first)
        # The edit asked with the diff, then landed in the client's buffer.
        (asked,) = client.permissions
        assert asked["toolCall"]["content"][0]["type"] == "diff"
        assert client.writes == [(str(notes), unsaved.replace("nothing yet", "done"))]
        result = api.requests[1].body["messages"][-1]["content"][-1]
        text = (
            result["content"]
            if isinstance(result["content"], str)
            else result["content"][0]["text"]
        )
        assert text.startswith("Edited notes.md")
        assert len(client.of_kind("usage_update")) == 2

        running = asyncio.ensure_future(
            conn.prompt(session_id=new.session_id, prompt=[acp.text_block("Talk slowly")])
        )
        assert await wait_until(lambda: "A slow" in client.text(), 20)
        await conn.cancel(session_id=new.session_id)
        assert (await asyncio.wait_for(running, 10)).stop_reason == "cancelled"

    later = RecordingClient()
    async with acp_agent(later, env) as (conn, _proc):
        await conn.load_session(cwd=str(workspace), session_id=new.session_id, mcp_servers=[])
        said = [u["content"]["text"] for u in later.of_kind("user_message_chunk")]
        assert said[0].endswith("Update @notes.md")  # after the attachment it carried
        assert said[-1] == "Talk slowly"
        assert later.text() == "Editing the notes.\n\nNoted."  # the cancelled answer left no turn
