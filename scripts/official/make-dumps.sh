#!/usr/bin/env bash
# Regenerates tests/data/official-state/: the official engine's internal state (int8 K/V codes and
# scales, engram rings, first-step logits) after whole conversations, as fixtures for the C++
# tests of the official numerics. Development tool, NOT run by CI.
#
# Needs: node, python3 with numpy (PYTHON, default /usr/bin/python3), the npm package
# @tyler71/cactus-needle2 1.0.3 installed somewhere (OFFICIAL_PKG=<dir>/node_modules/@tyler71/cactus-needle2),
# and the numpy emulation of the official numerics (emu.py; NEEDLE_EMU_DIR, default
# /work/shared/tools/official-numerics) which validates every fixture bit for bit.
#
# For each case: run the unmodified engine (dump_state.mjs), convert the dump into a compact
# fixture (check_state.py convert), then replay the fixture's forward calls in the emulation and
# require 0 mismatches (check_state.py check). Fails on the first case that does not match.
# Usage: scripts/official/make-dumps.sh [CASE ...]   (default: every case)
set -euo pipefail
cd "$(dirname "$0")/../.."
: "${OFFICIAL_PKG:?set OFFICIAL_PKG to the installed @tyler71/cactus-needle2 package folder}"
PY=${PYTHON:-/usr/bin/python3}
HERE=scripts/official
OUT=tests/data/official-state
MODELS=tests/data/models
TOOLS=$OUT/tools.json
VERSION=$(node -p "require('$OFFICIAL_PKG/package.json').version")
[ "$VERSION" = 1.0.3 ] || echo "warning: the dump offsets were read from version 1.0.3, not $VERSION" >&2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

only=("$@")
want() { [ ${#only[@]} -eq 0 ] && return 0; local c; for c in "${only[@]}"; do [ "$c" = "$1" ] && return 0; done; return 1; }

# dump NAME MODEL TURN... (env: MAX_TOKENS, SYSTEM, NEEDLE_KV_WINDOW as set by the caller)
dump() {
  local name=$1 model=$2; shift 2
  want "$name" || return 0
  echo "== $name ($model, $# turn(s))"
  local env_desc="MAX_TOKENS=${MAX_TOKENS}${NEEDLE_KV_WINDOW:+ NEEDLE_KV_WINDOW=$NEEDLE_KV_WINDOW}${SYSTEM:+ SYSTEM=<case.json system>}"
  if ! node "$HERE/dump_state.mjs" "$MODELS/$model.cact" "$TOOLS" "$work/$name" "$@" >"$work/$name.log" 2>&1; then
    cat "$work/$name.log" >&2
    echo "FAILED: $name: the engine run failed" >&2
    exit 1
  fi
  rm -rf "${OUT:?}/$name"
  "$PY" "$HERE/check_state.py" convert "$work/$name" "$OUT/$name" --model "$model.cact" \
    --how "scripts/official/make-dumps.sh: $env_desc node dump_state.mjs $model.cact tools.json OUT <turn_inputs> (@tyler71/cactus-needle2 $VERSION)"
  if ! "$PY" "$HERE/check_state.py" check "$OUT/$name"; then
    echo "FAILED: $name: the fixture does not match the emulation" >&2
    exit 1
  fi
}

MAX_TOKENS=16 dump tiny-q1 tiny "What is the weather in Paris?"
SYSTEM="You are a helpful assistant that answers briefly and calls tools when needed." \
  MAX_TOKENS=16 dump small-sys small "Book a table for 4 people tomorrow at 7pm"
MAX_TOKENS=16 dump tiny-conv tiny "What is the weather in Paris?" "and in Berlin?" "thanks"
MAX_TOKENS=16 dump crafted8 small-crafted-0.8 "Weather for Rome please"
MAX_TOKENS=24 dump official-conv official-geometry "Is it raining in London right now?" "What about Madrid?"
# One 398-token turn: the context passes sinks + window inside the first turn's prefill.
NEEDLE_KV_WINDOW=160 MAX_TOKENS=6 dump tiny-long tiny "$(cat "$OUT/long-query.txt")"
# A conversation whose later turns pass sinks + window (160 is the smallest window the engine
# accepts: it rounds NEEDLE_KV_WINDOW down to a multiple of 32 and clamps it to [160, 2048]), so
# the chunking of later turns' prefill matters. The turns start off the 32-grid on purpose.
NEEDLE_KV_WINDOW=160 MAX_TOKENS=16 dump tiny-long-conv tiny "What is the weather in Paris?" \
  "I am planning a trip to Berlin, Munich and Hamburg, and I would like to know whether I should pack an umbrella, a warm coat or sunglasses. Please check the weather in each of these cities and tell me what to expect." \
  "and in Berlin?" \
  "Also, my sister is flying from Madrid to Rome on Friday morning and wants to know if it will be windy or rainy when she lands, and what the temperature will be in the evening." \
  "One more question: is it going to snow in Oslo or Stockholm this weekend, and should we expect strong wind near the coast?" \
  "thanks"

# tiny-long-conv must tell the chunking rules apart: every alternative rule must mismatch.
if want tiny-long-conv; then
  echo "== tiny-long-conv: alternative chunking rules for later turns (each must mismatch)"
  for rule in abs32 grid whole prevtok perpos; do
    if "$PY" "$HERE/check_state.py" check "$OUT/tiny-long-conv" --later "$rule" | tail -1; then
      echo "FAILED: tiny-long-conv does not distinguish rule '$rule' from the engine's" >&2
      exit 1
    fi
  done
fi
echo "total size: $(du -sh --apparent-size "$OUT" | cut -f1)"
