"""Dollar cost of token usage, from a price table users can extend in settings."""

from __future__ import annotations

from agent_ls.ports.messages import Usage

# USD per million tokens: input, output, cache read, cache write (5-minute TTL).
# Claude Haiku 5.5 bills prompts over 100K tokens at five times these rates (not modelled here:
# a `prices` setting can say otherwise); Fable's cache rates are the usual 0.1x and 1.25x.
PRICES: dict[str, tuple[float, float, float, float]] = {
    "claude-fable-5": (10.0, 50.0, 1.0, 12.5),
    "claude-fable-5-2": (8.0, 40.0, 0.8, 10.0),
    "claude-opus-5": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-5-5": (4.0, 20.0, 0.2, 5.0),
    "claude-sonnet-5": (2.0, 10.0, 0.2, 2.5),
    "claude-sonnet-5-5": (2.0, 10.0, 0.1, 2.5),
    "claude-haiku-5-5": (0.1, 0.5, 0.01, 0.125),
    "claude-opus-4": (15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-5": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-6": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-7": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-8": (5.0, 25.0, 0.5, 6.25),
    "claude-sonnet-4": (3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4": (1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": (0.8, 4.0, 0.08, 1.0),
    "gpt-4.1": (2.0, 8.0, 0.5, 0.0),
    "gpt-4.1-mini": (0.4, 1.6, 0.1, 0.0),
    "gpt-4o": (2.5, 10.0, 1.25, 0.0),
    "gpt-4o-mini": (0.15, 0.6, 0.075, 0.0),
    "gpt-5": (1.25, 10.0, 0.125, 0.0),
    "gpt-5-mini": (0.25, 2.0, 0.025, 0.0),
}


Price = tuple[float, float, float, float]


def price_for(model: str, extra: dict[str, list[float]] | None = None) -> Price | None:
    """The longest table key that prefixes the model name (``provider:`` stripped).

    ``extra`` (from settings) adds or overrides entries; missing trailing numbers count as 0.
    """
    table: dict[str, Price] = dict(PRICES)
    for key, numbers in (extra or {}).items():
        padded = [float(n) for n in numbers[:4]] + [0.0] * (4 - len(numbers[:4]))
        table[key] = (padded[0], padded[1], padded[2], padded[3])
    name = model.split(":", 1)[-1]
    best = max((k for k in table if name.startswith(k)), key=len, default=None)
    return table[best] if best else None


def cost_usd(model: str, usage: Usage, extra: dict[str, list[float]] | None = None) -> float:
    price = price_for(model, extra)
    if price is None:
        return 0.0
    p_in, p_out, p_read, p_write = price
    return (
        usage.input_tokens * p_in
        + usage.output_tokens * p_out
        + usage.cache_read_tokens * p_read
        + usage.cache_write_tokens * p_write
    ) / 1_000_000
