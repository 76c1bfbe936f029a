#!/usr/bin/env bash
# Session goldens made with the official engine (npm @tyler71/cactus-needle2, unmodified WASM,
# NEEDLE_DEBUG=1): fresh turns, conversations with tool results, > 5 tools, long turns, think
# phases, every value type and enum grounding, on the fixture models in tests/data/models.
# Writes tests/data/golden/session-v2/<model>.session.json. Development tool, not part of CI.
# Usage: OFFICIAL_PKG=<node_modules/@tyler71/cactus-needle2> scripts/official/make-session-goldens.sh [MODEL...]
# MODEL: a fixture name (tests/data/models/MODEL.cact) or a path ending in .cact.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ -z "${OFFICIAL_PKG:-}" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm init -y >/dev/null && npm install --silent @tyler71/cactus-needle2 >/dev/null)
  export OFFICIAL_PKG="$work/node_modules/@tyler71/cactus-needle2"
fi
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(tiny small small-crafted-0.5 small-crafted-0.8)
out=tests/data/golden/session-v2
mkdir -p "$out"
tmp=$(mktemp -d)
python3 scripts/official/session_cases.py cases "$tmp/cases.jsonl"
for arg in "${models[@]}"; do
  # A fixture name (tests/data/models/NAME.cact) or a path to a .cact (e.g. examples/demo.cact).
  if [[ "$arg" == *.cact ]]; then path=$arg; m=$(basename "$arg" .cact); else path=tests/data/models/$arg.cact; m=$arg; fi
  node scripts/official/engine_session.mjs "$path" "$tmp/cases.jsonl" > "$tmp/$m.jsonl"
  python3 scripts/official/session_cases.py golden "$m" "$tmp/$m.jsonl" "$out/$m.session.json"
  echo "$out/$m.session.json"
done
rm -rf "$tmp"
