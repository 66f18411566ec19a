"""Provider-neutral conversation history.

The loop keeps history in these shapes; each model provider translates them to its
wire format. They serialise to plain JSON (``to_json``/``from_json``) for session files.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["user", "assistant"]


@dataclass(slots=True)
class TextBlock:
    text: str
    type: Literal["text"] = "text"


@dataclass(slots=True)
class ThinkingBlock:
    """Extended thinking; echoed back unchanged (with its signature) as the API requires.

    ``binding``: what the provider bound the block to (model, system prompt, tools) where it
    refuses the block in any other conversation; the provider leaves it out when that changed.
    """

    thinking: str
    signature: str = ""
    redacted_data: str | None = None
    type: Literal["thinking"] = "thinking"
    binding: str | None = None


@dataclass(slots=True)
class ToolUseBlock:
    id: str
    name: str
    input: dict[str, Any]
    type: Literal["tool_use"] = "tool_use"


@dataclass(slots=True)
class ToolResultBlock:
    tool_use_id: str
    content: str
    is_error: bool = False
    type: Literal["tool_result"] = "tool_result"
    # [media type, base64 data] pairs: an MCP tool's images, for providers that take them
    images: list[list[str]] | None = None


Block = TextBlock | ThinkingBlock | ToolUseBlock | ToolResultBlock

_BLOCK_TYPES: dict[str, type[Any]] = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
}


@dataclass(slots=True)
class Message:
    role: Role
    content: list[Block] = field(default_factory=list)

    def text(self) -> str:
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    def tool_uses(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    def to_json(self) -> dict[str, Any]:
        return {"role": self.role, "content": [_block_json(b) for b in self.content]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        blocks: list[Block] = []
        for raw in data["content"]:
            kind = _BLOCK_TYPES[raw["type"]]
            blocks.append(kind(**{k: v for k, v in raw.items() if k != "type"}))
        return cls(role=data["role"], content=blocks)


def _block_json(block: Block) -> dict[str, Any]:
    data = asdict(block)
    for optional in ("images", "binding"):
        if optional in data and data[optional] is None:
            del data[optional]  # most blocks have none: keep transcripts as they were
    return data


@dataclass(slots=True)
class Usage:
    """Token counts; ``input_tokens`` is the uncached input as the API reports it."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_tokens += other.cache_read_tokens
        self.cache_write_tokens += other.cache_write_tokens

    @property
    def context_tokens(self) -> int:
        """Tokens the last request put in the context window."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def to_contract(self) -> dict[str, int]:
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "cachedReadTokens": self.cache_read_tokens,
            "cachedWriteTokens": self.cache_write_tokens,
        }
