#!/usr/bin/env bash
# Writes cmake/text-order.txt: the functions a `needle run` executes, one mangled symbol per line,
# which the link puts first and together in the binary's code (lld --symbol-ordering-file; see
# the top-level CMakeLists.txt). The kernel maps the 64 KiB around every code page a process
# touches, so code a run needs, spread through a 4.6 MB binary, costs resident memory; packed, it
# costs what it is.
#   scripts/gen-text-order.sh [BUILD_DIR]     (default: build; needs valgrind, perf optional)
# Sources, in order:
#   1. callgrind (every function executed, however rarely) over a query run at the official
#      geometry with tools, a --batch run of the demo model and an interactive turn; valgrind runs
#      the AVX2 kernels (it has no AVX-512).
#   2. perf samples (cpu-clock, one per 10 µs: VMs rarely expose instruction counters) of the same
#      query run at --isa avx512, when the CPU has it: the AVX-512 kernels, which callgrind cannot
#      run.
# Regenerate after changes that rename or add functions on the run path; a stale list only costs
# memory (names the build lacks are skipped; functions missing from it are laid out after).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${1:-$root/build}"
needle="$build/needle"
out="$root/cmake/text-order.txt"
[ -x "$needle" ] || { echo "gen-text-order: $needle not built" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "gen-text-order: valgrind is needed" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
model="$root/tests/data/models/official-geometry.cact"
query=(run "$model" --tools "$root/examples/tools.json" -t 1 -n 40
  "What is the weather like in Paris today and tomorrow?")

grind() {  # callgrind one command; its functions, mangled, in the file's order
  local name="$1"; shift
  valgrind --tool=callgrind --demangle=no --compress-strings=no \
    --callgrind-out-file="$work/$name.cg" "$needle" "$@" >/dev/null 2>"$work/$name.err" </dev/null ||
    { echo "gen-text-order: callgrind of $name failed:" >&2; tail -5 "$work/$name.err" >&2; exit 1; }
  sed -nE "s/^c?fn=(.*)$/\1/p" "$work/$name.cg" | sed -E "s/'[0-9]+$//" | grep -v '^0x' || true
}
{
  grind query "${query[@]}"
  head -20 "$root/examples/demo-heldout.jsonl" | python3 -c '
import json, sys
for line in sys.stdin:
    request = json.loads(line)
    request.pop("expected", None)
    print(json.dumps(request))' > "$work/requests.jsonl"
  grind batch run "$root/examples/demo.cact" -t 1 --batch "$work/requests.jsonl"
  printf 'What is the weather in Paris?\n' > "$work/lines.txt"
  grind interactive run "$root/examples/demo.cact" --tools "$root/examples/demo-tools.json" \
    -t 1 --interactive < "$work/lines.txt"
} > "$work/grind.txt"

: > "$work/perf.txt"
if command -v perf >/dev/null; then
  if "$needle" run "$model" --isa avx512 -n 1 --raw "x" >/dev/null 2>&1; then
    for repeat in 1 2 3; do
      perf record -q -e cpu-clock -c 10000 -o "$work/avx512.data" \
        "$needle" "${query[@]}" --isa avx512 >/dev/null 2>&1 || continue
      perf report -i "$work/avx512.data" --no-demangle --sort sym --stdio 2>/dev/null |
        sed -nE 's/^ +[0-9.]+% +\[\.\] (.*[^ ]) *$/\1/p' >> "$work/perf.txt"
    done
  fi
fi

{
  echo "# needle's run-path functions, first in the binary's code (scripts/gen-text-order.sh)."
  awk 'NF && !seen[$0]++' "$work/grind.txt" "$work/perf.txt"
} > "$work/order.txt"
mv "$work/order.txt" "$out"
echo "gen-text-order: $(grep -vc '^#' "$out") functions ($(wc -l < "$work/grind.txt") from callgrind," \
  "$(wc -l < "$work/perf.txt") perf samples) -> $out"
