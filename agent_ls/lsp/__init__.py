"""The LSP front door: the only package (with ``client/``) that speaks LSP."""
