#!/usr/bin/env bash
# One command for a device (Raspberry Pi 5 or any Linux machine): installs the Debian packages,
# builds needle (Release, no -march=native: the kernels are chosen at run time), checks it against
# the goldens, then writes the full bench record set -- every kernel ISA this CPU can run, 1 to 4
# threads (at most the core count), official and f32 numerics -- as one JSONL file (one record per
# line, "system" inside each: CPU model from /proc/cpuinfo / MIDR, ISAs available).
#   bash scripts/bench-device.sh [OUT.jsonl] [MODEL.cact]
# Defaults: bench-<hostname>-<UTC date>.jsonl, tests/data/models/official-geometry.cact. Extra
# `needle bench` options may be given in NEEDLE_BENCH_ARGS (default: -p 100 -n 32 -r 5 --warmup 1).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench-$(hostname)-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
MODEL=${2:-tests/data/models/official-geometry.cact}
bash scripts/setup.sh
bash scripts/build.sh
BIN=./build/needle
# The goldens first: numbers from a build that disagrees with the engine are not worth keeping.
$BIN verify tests/data/models/official-geometry.cact \
  --golden tests/data/golden/official/golden.json | tail -1 | grep -qx PASS ||
  { echo "bench-device: needle verify failed on this device; not benchmarking"; exit 1; }
ISAS=$($BIN verify tests/data/models/tiny.cact --json |
  python3 -c 'import json, sys; print(",".join(json.load(sys.stdin)["available_isas"]))')
CORES=$(nproc)
THREADS=$(seq -s, 1 $((CORES < 4 ? CORES : 4)))
echo "bench-device: ISAs $ISAS, threads $THREADS, model $MODEL -> $OUT"
# shellcheck disable=SC2086
$BIN bench "$MODEL" --isa "$ISAS" -t "$THREADS" --numerics official,f32 \
  ${NEEDLE_BENCH_ARGS:--p 100 -n 32 -r 5 --warmup 1} -o jsonl >"$OUT.tmp"
mv "$OUT.tmp" "$OUT"
echo "bench-device: $(wc -l <"$OUT") records in $OUT"
# A readable summary of the same records.
python3 - "$OUT" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"cpu: {rows[0]['system']['cpu']}")
print(f"{'isa':8} {'numerics':8} {'threads':>7} {'prefill tok/s':>14} {'decode tok/s':>13}")
for r in rows:
    print(f"{r['isa']:8} {r['path']:8} {r['threads']:>7} {r['prefill_tok_s']:>14.1f} "
          f"{r['decode_tok_s']:>13.1f}")
EOF
