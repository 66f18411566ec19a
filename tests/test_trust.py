"""Project trust: approval is per workspace, file and exact content; anything else is Deny."""

from __future__ import annotations

from pathlib import Path

from agent_ls.ports.editor import Decision
from agent_ls.safety.trust import TrustRequest, TrustStore, ensure_trusted
from tests.fakes import FakePort


def allowing() -> FakePort:
    return FakePort(decisions=[Decision.ALLOW])


def request(root: Path, content: bytes) -> TrustRequest:
    return TrustRequest(
        root=root,
        file=root / ".mcp.json",
        content=content,
        kind="MCP servers",
        items=("time: uvx mcp-server-time --local-timezone UTC",),
    )


async def test_approval_is_remembered_for_the_exact_content(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "data" / "trust.json")
    port = allowing()
    assert await ensure_trusted(port, store, request(tmp_path, b"{}"))
    message = port.asked[0].message
    assert "uvx mcp-server-time --local-timezone UTC" in message and ".mcp.json" in message
    assert port.asked[0].grant is None  # Allow / Deny only: nothing "for this session"

    again = FakePort()  # would deny if asked
    assert await ensure_trusted(again, TrustStore(store.path), request(tmp_path, b"{}"))
    assert again.asked == []

    changed = FakePort()
    assert not await ensure_trusted(changed, store, request(tmp_path, b'{"x": 1}'))
    assert len(changed.asked) == 1  # a changed file asks again


async def test_no_answer_or_deny_is_not_remembered(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "trust.json")
    assert not await ensure_trusted(FakePort(), store, request(tmp_path, b"{}"))
    assert not await ensure_trusted(
        FakePort(decisions=[Decision.DENY]), store, request(tmp_path, b"{}")
    )
    assert not store.path.exists()


async def test_approval_is_per_workspace(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "trust.json")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    assert await ensure_trusted(
        allowing(), store, request(tmp_path / "a", b"{}")
    )
    assert not await ensure_trusted(FakePort(), store, request(tmp_path / "b", b"{}"))


async def test_a_corrupt_store_asks_again(tmp_path: Path) -> None:
    store = TrustStore(tmp_path / "trust.json")
    store.path.write_text("not json")
    assert not await ensure_trusted(FakePort(), store, request(tmp_path, b"{}"))
    assert await ensure_trusted(
        allowing(), store, request(tmp_path, b"{}")
    )
    assert store.is_approved(request(tmp_path, b"{}"))
