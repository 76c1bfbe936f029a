#!/usr/bin/env bash
# How the needle binary is linked, which decides much of a run's resident set (README, Memory):
#   static  it asks for no program interpreter and no shared library (readelf);
#   order   the functions cmake/text-order.txt names are in the binary (>= 90% of the list:
#           fewer means the list is stale; scripts/gen-text-order.sh rewrites it) and packed at
#           the start of the code: the address span of the listed functions found is at most
#           1.25x their total size and starts within the first 64 KiB of the text. Without
#           the ordering they spread over the whole text (3.9 MB against 1.3 MB listed).
#   tests/binary_layout_test.sh NEEDLE static|order [ORDER_FILE]
set -euo pipefail
needle="$1"
what="$2"
fail() { echo "FAIL: $*" >&2; exit 1; }
case "$what" in
  static)
    if readelf -l "$needle" | grep -q 'INTERP'; then fail "$needle has a program interpreter"; fi
    needed="$(readelf -d "$needle" 2>/dev/null | grep NEEDED || true)"
    [ -z "$needed" ] || fail "$needle needs shared libraries: $needed"
    echo "static: no interpreter, no shared library"
    ;;
  order)
    order="$3"
    nm -S "$needle" | awk -v order="$order" '
      function hex(x,   v, i) {  # POSIX awk (mawk) has no strtonum
        v = 0
        for (i = 1; i <= length(x); i++) v = v * 16 + index("0123456789abcdef", substr(x, i, 1)) - 1
        return v
      }
      BEGIN {
        while ((getline line < order) > 0)
          if (line !~ /^#/ && line != "") { listed[line] = 1; n_listed++ }
      }
      $NF in listed && !($NF in seen) { seen[$NF] = 1; n_found++ }
      NF == 4 && $3 ~ /^[tTwW]$/ {
        a = hex($1); s = hex($2)
        if (text_lo == "" || a < text_lo) text_lo = a
        if ($4 in listed) {
          total += s
          if (lo == "" || a < lo) lo = a
          if (a + s > hi) hi = a + s
        }
      }
      END {
        printf "order: %d of %d listed functions in the binary, %d bytes, spanning %d bytes from text+%d\n",
          n_found, n_listed, total, hi - lo, lo - text_lo
        if (n_listed == 0) { print "FAIL: empty list"; exit 1 }
        if (n_found < 0.9 * n_listed) {
          print "FAIL: the list is stale (run scripts/gen-text-order.sh)"; exit 1
        }
        if (hi - lo > 1.25 * total) { print "FAIL: the listed functions are not packed"; exit 1 }
        if (lo - text_lo > 65536) { print "FAIL: the listed functions do not come first"; exit 1 }
      }'
    ;;
  *) fail "usage: $0 NEEDLE static|order [ORDER_FILE]" ;;
esac
