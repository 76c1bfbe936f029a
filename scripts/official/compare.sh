#!/usr/bin/env bash
# Side-by-side throughput of the official engine (WASM, from npm) and needle on one machine.
# Development tool, not part of CI: it installs the npm package into a temporary folder.
# Usage: scripts/official/compare.sh [MODEL.cact] [GOLDEN.json]
set -euo pipefail
cd "$(dirname "$0")/../.."
MODEL=${1:-tests/data/models/official-geometry.cact}
GOLDEN=${2:-tests/data/golden/official/golden.json}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm init -y >/dev/null && npm install --silent @tyler71/cactus-needle2 >/dev/null)
cp scripts/official/bench_engine.mjs "$work/"
echo "official engine (WASM), per golden entry, prompt ~100 tokens, 24 new tokens:"
node "$work/bench_engine.mjs" "$MODEL" 3 "$GOLDEN" | python3 -c '
import json, statistics, sys
rows = [json.loads(l) for l in sys.stdin]
print("  prefill tok/s median %.1f, decode tok/s median %.1f (%d runs)" % (
    statistics.median(r["prefill_tps"] for r in rows),
    statistics.median(r["decode_tps"] for r in rows), len(rows)))'
echo "needle (this build), same sizes, both numeric paths, every ISA of this CPU:"
isas=$(./build/needle verify "$MODEL" --json | python3 -c 'import json,sys; print(",".join(json.load(sys.stdin)["available_isas"]))')
./build/needle bench "$MODEL" -t 1,2 -p 100 -n 24 -r 5 --numerics official,f32 --isa "$isas"
