#!/usr/bin/env bash
# Regenerates the help blocks of docs/CLI.md from the binary's --help output (the text around them
# is hand-written and kept). tests/cli_doc_test.py, run by CTest, fails when they differ.
# Usage: scripts/gen-cli-doc.sh [NEEDLE_BINARY]   (default build/needle)
set -euo pipefail
cd "$(dirname "$0")/.."
needle="${1:-build/needle}"
if [ ! -x "$needle" ]; then
  echo "gen-cli-doc: no binary at $needle (build first or pass its path)" >&2
  exit 1
fi
python3 tests/cli_doc_test.py --write "$needle" docs/CLI.md
