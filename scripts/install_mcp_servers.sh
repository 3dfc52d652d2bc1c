#!/usr/bin/env bash
# Installs the reference MCP servers the tests run (tests/mcp/package.json,
# pinned by its package-lock.json) into .mcp-servers/ with `npm ci`.
# Does nothing when the installed lock file already matches. Without npm it
# says so and exits 0 (the MCP tests then skip), except under CI=true.
set -euo pipefail
cd "$(dirname "$0")/.."
SRC=tests/mcp
DEST=.mcp-servers

if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: the MCP tests will skip (install Node.js 20+ to run them)"
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi
# npm ci records what it installed in node_modules/.package-lock.json; a
# matching copy of our lock next to it means the tree is current.
if cmp -s "$SRC/package-lock.json" "$DEST/package-lock.json" && [ -f "$DEST/node_modules/.package-lock.json" ]; then
  exit 0
fi
mkdir -p "$DEST"
cp "$SRC/package.json" "$SRC/package-lock.json" "$DEST/"
npm ci --prefix "$DEST" --ignore-scripts --no-audit --no-fund --loglevel=error
