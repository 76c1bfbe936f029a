#!/usr/bin/env bash
# Tests the WASM build under node (the CI job; everything it needs is installed here): Debian's
# emscripten, node and npm (scripts/setup.sh --wasm), the official npm package
# @tyler71/cactus-needle2 (npm install into build-wasm/npm, or the one OFFICIAL_PKG points to), and
# a native `needle` (build/needle when present, e.g. after scripts/test.sh; otherwise the CLI alone
# is built into build-wasm-native/). Then:
#   1. kernel bit-exactness: the kernel tests (Catch2, compiled to wasm) hold every table of the
#      module, simd128 included, to the scalar reference;
#   2. end to end through the official npm wrapper: our needle.js/needle.wasm dropped into a copy
#      of the package must answer like native `needle run`, like the engine's session goldens and
#      like the official wasm itself, turn by turn (scripts/wasm-envelopes.mjs);
#   3. speed against the official wasm in the same node process (scripts/bench-wasm.mjs; reported,
#      not enforced: CI machines are shared).
# Prints the seconds of every step; exits non-zero if anything is missing or any check fails.
set -euo pipefail
cd "$(dirname "$0")/.."
t_start=$SECONDS
step() {
  local name=$1
  shift
  local t0=$SECONDS
  echo "=== test-wasm: $name"
  "$@"
  echo "=== test-wasm: $name done in $((SECONDS - t0)) s"
}
fail() {
  echo "test-wasm: $*" >&2
  exit 1
}

step "build (emscripten)" bash scripts/build-wasm.sh
for f in build-wasm/needle.js build-wasm/needle.wasm build-wasm/needle_kernel_tests.js; do
  [ -s "$f" ] || fail "$f was not built"
done
command -v npm >/dev/null || fail "npm is missing (scripts/setup.sh --wasm installs it)"

native=${NEEDLE_NATIVE_BIN:-build/needle}
if [ ! -x "$native" ]; then
  native=build-wasm-native/needle
  step "build native needle (CLI only, build-wasm-native/)" bash -c '
    cmake -S . -B build-wasm-native -G Ninja -DCMAKE_BUILD_TYPE=Release -DNEEDLE_BUILD_TESTS=OFF \
      >/dev/null && cmake --build build-wasm-native -j "$(nproc)" --target needle >/dev/null'
fi
[ -x "$native" ] || fail "no native needle at $native"

# The official package (pinned: the version the engine goldens were made with), and a copy of it
# with our module inside.
pkg=@tyler71/cactus-needle2
version=1.0.3
fetch_official() {
  if [ -z "${OFFICIAL_PKG:-}" ]; then
    OFFICIAL_PKG=build-wasm/npm/node_modules/$pkg
    if [ ! -f "$OFFICIAL_PKG/package.json" ] ||
      ! grep -q "\"version\": \"$version\"" "$OFFICIAL_PKG/package.json"; then
      mkdir -p build-wasm/npm
      (cd build-wasm/npm && { [ -f package.json ] || npm init -y >/dev/null; } &&
        npm install --no-audit --no-fund "$pkg@$version" >/dev/null) ||
        fail "npm install $pkg@$version failed (registry access needed)"
    fi
  fi
  for f in src/needle.mjs vendor/wasm/needle.js vendor/wasm/needle.wasm; do
    [ -s "$OFFICIAL_PKG/$f" ] || fail "$OFFICIAL_PKG/$f is missing"
  done
  rm -rf build-wasm/pkg-ours
  cp -r "$OFFICIAL_PKG" build-wasm/pkg-ours
  cp build-wasm/needle.js build-wasm/needle.wasm build-wasm/pkg-ours/vendor/wasm/
}
step "npm package (official, and ours inside a copy)" fetch_official

step "kernel tests (node)" node build-wasm/needle_kernel_tests.js
step "envelopes: ours = native = official (npm wrapper)" \
  node scripts/wasm-envelopes.mjs build-wasm/pkg-ours "$OFFICIAL_PKG" "$native" --official-turns 8
step "speed: ours vs the official wasm" \
  node scripts/bench-wasm.mjs build-wasm/pkg-ours "$OFFICIAL_PKG"
# needle bench --official: a needle row then the official engine's row, with its own timings.
bench_official() {
  "$native" bench tests/data/models/small-crafted-0.8.cact -p 32 -n 16 -r 2 --warmup 0 -t 1 \
    --official "$OFFICIAL_PKG" -o jsonl >build-wasm/bench-official.jsonl
  python3 - build-wasm/bench-official.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["engine"] for r in rows] == ["needle", "official"], rows
o = rows[1]
assert o["isa"] == "wasm" and o["prefill_tok_s"] > 0 and o["total_ms"] > 0, o
assert len(o["prefill_samples"]) == 2 and o["first_token_ms"] is None, o
print("needle prefill %.0f tok/s, official %.0f tok/s" % (rows[0]["prefill_tok_s"], o["prefill_tok_s"]))
PY
}
step "needle bench --official (rows for the official engine)" bench_official
# needle bench --session --official: the same request through both engines; the engine's
# needle_init / needle_complete return values must be our prefix and reply token counts.
bench_session_official() {
  "$native" bench examples/demo.cact --session examples/demo-tools.json -r 2 --warmup 0 -t 1 \
    --query "What is the weather like in Paris today?" --query "Set a timer for 5 minutes" \
    --official "$OFFICIAL_PKG" -o jsonl >build-wasm/bench-session-official.jsonl
  python3 - build-wasm/bench-session-official.jsonl <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["engine"] for r in rows] == ["needle", "needle", "official", "official"], rows
for ours, theirs in zip(rows[:2], rows[2:]):
    assert ours["query"] == theirs["query"], (ours, theirs)
    for key in ("prefix_tokens", "reply_tokens", "reply_type"):
        assert ours[key] == theirs[key], (key, ours[key], theirs[key])
    assert theirs["turn_tokens"] is None and len(theirs["init_ms_samples"]) == 2, theirs
    print("%r: %d + %d tokens, %s; init %.1f vs %.1f ms, reply %.1f vs %.1f ms (needle vs official)"
          % (ours["query"], ours["prefix_tokens"], ours["reply_tokens"], ours["reply_type"],
             ours["init_ms"], theirs["init_ms"], ours["reply_ms"], theirs["reply_ms"]))
PY
}
step "needle bench --session --official (the same requests through both engines)" bench_session_official
echo "=== test-wasm: all passed in $((SECONDS - t_start)) s"
