#!/usr/bin/env bash
# Installs the rivals bench/peers.py measures agent-ls against, from the npm registry, into
# ~/.cache/agent-ls-bench/peers (or $1). Not run by CI: the benchmark is run by hand.
set -euo pipefail
dest="${1:-$HOME/.cache/agent-ls-bench/peers}"
mkdir -p "$dest"
npm install --no-audit --no-fund --prefix "$dest" \
  @anthropic-ai/claude-code@2.1.328 \
  @github/copilot-language-server@1.539.0
"$dest/node_modules/.bin/claude" --version
