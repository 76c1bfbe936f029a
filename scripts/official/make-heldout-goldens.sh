#!/usr/bin/env bash
# Held-out goldens made with the official engine (npm @tyler71/cactus-needle2, unmodified WASM,
# NEEDLE_DEBUG=1): one fresh turn per line of a held-out set ({tools, query, expected} lines), and
# 100 three-turn conversations built from its lines (two queries with a tool result between, the
# union of their tools, often more than 5: retrieval), the engine's reply envelopes, return values
# and call texts. Tests compare `needle`'s session with them (tests/session_v2_test.cpp,
# "held-out goldens"). Development tool, not part of CI; rerun it whenever the model changes.
# Usage: OFFICIAL_PKG=<node_modules/@tyler71/cactus-needle2> \
#   scripts/official/make-heldout-goldens.sh [MODEL.cact [HELDOUT.jsonl [MAX_TOKENS]]]
# Defaults: examples/demo.cact, examples/demo-heldout.jsonl, 256 (the eval default).
# Writes tests/data/golden/heldout/<model>.heldout.json, <model>.heldout-{24,40,56}.json,
# <model>.conversations.json, <model>.conversations-short.json,
# <model>.conversations-seed2.json and <model>.conversations-seed3.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-examples/demo.cact}
heldout=${2:-examples/demo-heldout.jsonl}
mt=${3:-256}
if [ -z "${OFFICIAL_PKG:-}" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm init -y >/dev/null && npm install --silent @tyler71/cactus-needle2 >/dev/null)
  export OFFICIAL_PKG="$work/node_modules/@tyler71/cactus-needle2"
fi
name=$(basename "$model" .cact)
out=tests/data/golden/heldout
mkdir -p "$out"
tmp=$(mktemp -d)
python3 scripts/official/session_cases.py heldout-cases "$heldout" "$mt" "$tmp/cases.jsonl"
node scripts/official/engine_session.mjs "$model" "$tmp/cases.jsonl" > "$tmp/engine.jsonl"
python3 scripts/official/session_cases.py heldout-golden "$name" "$heldout" "$mt" "$tmp/engine.jsonl" \
  "$out/$name.heldout.json"
# The same lines at budgets 24, 40, 56: truncated calls, the 4-token close rule, the grounding
# and branch floors.
for short in 24 40 56; do
  python3 scripts/official/session_cases.py heldout-cases "$heldout" $short "$tmp/cases-s.jsonl"
  node scripts/official/engine_session.mjs "$model" "$tmp/cases-s.jsonl" > "$tmp/engine-s.jsonl"
  python3 scripts/official/session_cases.py heldout-golden "$name" "$heldout" $short \
    "$tmp/engine-s.jsonl" "$out/$name.heldout-$short.json"
done
# Conversations: 100 from seed 1, 200 from seed 2 (the second set holds long contexts that
# re-forward the confidence head's features) and 300 from seed 3 (a fresh set, made after every
# rule had been fitted to the first two).
# And 100 from seed 4 at budgets 20, 24, 28 in turn (turns that end at the budget, then go on).
for set in "100 1 conversations" "200 2 conversations-seed2" "300 3 conversations-seed3" \
  "100 4 conversations-short"; do
  read -r count seed file <<<"$set"
  python3 scripts/official/session_cases.py conversation-cases "$heldout" "$count" "$seed" \
    "$tmp/conv.jsonl"
  if [ "$file" = conversations-short ]; then
    python3 scripts/official/session_cases.py short-budgets "$tmp/conv.jsonl" 20,24,28
  fi
  node scripts/official/engine_session.mjs "$model" "$tmp/conv.jsonl" > "$tmp/conv-engine.jsonl"
  python3 scripts/official/session_cases.py conversation-golden "$name" "$heldout" \
    "$tmp/conv.jsonl" "$tmp/conv-engine.jsonl" "$out/$name.$file.json"
done
rm -rf "$tmp"
echo "$out/$name.heldout*.json $out/$name.conversations*.json"
