"""The agent core: session, loop, prompt assembly. Knows no LSP."""
