"""The headless LSP client (``agent-ls run``) and what it shares with test clients."""
