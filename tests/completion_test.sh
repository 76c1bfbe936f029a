#!/usr/bin/env bash
# The generated bash completion (scripts/gen-completion.sh -> build/needle.bash) completes as
# promised: subcommands, each subcommand's options and the global ones, enumerated values (also
# after "=" and in comma lists), .cact files and folders for models, folders for OUT_DIR, files
# for file options, nothing for query text. Each case runs the completion function as bash does
# (COMP_WORDS, COMP_CWORD) in a folder with a few files and compares COMPREPLY, sorted, with the
# expected words. A negative control first proves that a wrong expectation fails.
# Usage: completion_test.sh COMPLETION_FILE NEEDLE_BINARY
set -uo pipefail
completion="$1"
needle="$2"
# Sourced inside a function, as bash-completion's loader does (the tables must stay global).
load() {
  # shellcheck disable=SC1090
  source "$completion"
}
load || { echo "FAIL: cannot source $completion"; exit 1; }
[[ "$(complete -p needle)" == "complete -F _needle needle" ]] || {
  echo "FAIL: needle is not registered: $(complete -p needle 2>&1)"
  exit 1
}
read -r -a isas <<<"$("$needle" --version | sed -n 's/^isas *compiled: *//p')"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
mkdir models out
touch a.cact b.cact tools.json notes.txt models/c.cact

failures=0
cases=0
# complete EXPECTED WORD... : the last word is the one under the cursor ("" for an empty one).
complete_line() {
  COMP_WORDS=("$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMP_LINE="$*"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _needle
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
check() {
  local expected="$1"
  shift
  local got
  got="$(complete_line "$@")"
  cases=$((cases + 1))
  if [[ "$got" != "$expected" ]]; then
    printf 'FAIL: %s<TAB>\n  expected: %s\n  got:      %s\n' "$*" "$expected" "$got"
    failures=$((failures + 1))
  fi
}
sorted() { printf '%s\n' "$@" | sort | tr '\n' ' ' | sed 's/ $//'; }
# check_has WORDS WORD... : each of WORDS is offered exactly once (other words may be too).
check_has() {
  local wanted="$1" word offered count
  shift
  local got
  got="$(complete_line "$@")"
  cases=$((cases + 1))
  for word in $wanted; do
    count=0
    for offered in $got; do
      [[ $offered == "$word" ]] && count=$((count + 1))
    done
    if [[ $count -ne 1 ]]; then
      printf 'FAIL: %s<TAB> offers %s %s times (want once)\n  got: %s\n' "$*" "$word" "$count" "$got"
      failures=$((failures + 1))
      return
    fi
  done
}

# Negative control: the comparison is not vacuous.
if [[ "$(complete_line needle ru)" == "rum" ]]; then
  echo "FAIL: negative control matched"
  exit 1
fi

# Subcommands.
check "run" needle ru
check "$(sorted bench dequant detokenize embed eval inspect requant run synth tokenize verify)" \
  needle ""
check "run" needle --log-level info ru
check "run" needle -q ru
# Options: the subcommand's own, then the global ones (once).
check "--numerics" needle run --num
check "--tensors" needle inspect --te
check_has "--help --json --log-level --no-mmap --quiet --tensors --version" needle inspect --
check_has "--help --max-tokens --numerics --tools --log-level --quiet" needle run --
check "$(sorted --help --log-level --quiet --version)" needle --
check "$(sorted --prompt-tokens)" needle bench --pr
# Enumerated values.
check "f32 official" needle run --numerics ""
check "official" needle run --numerics o
check "f32 official" needle run --numerics =
check "f32" needle run --numerics = f
check "like official" needle synth out.cact --like a.cact --geometry ""
check "csv json jsonl md sql" needle bench -o ""
check "json jsonl" needle bench a.cact --output js
check "$(sorted debug error info off trace warning)" needle --log-level ""
check "warning" needle run --log-level w
check "$(sorted "${isas[@]}")" needle run --isa ""
check "$(sorted "${isas[@]}")" needle verify a.cact --isa ""
check "scalar" needle bench --isa sc
check "$(printf 'scalar,%s\n' "${isas[@]}" | sort | tr '\n' ' ' | sed 's/ $//')" needle bench --isa scalar,
# Numbers and free text: nothing.
check "" needle run -n ""
check "" needle run --system ""
check "" needle run a.cact ""
check "" needle run a.cact "Set a timer" ""
check "" needle detokenize a.cact 1 ""
# Models: *.cact files and folders; OUT_DIR: folders; file options: every file.
check "a.cact b.cact models out" needle run ""
check "a.cact" needle inspect a
check "models/c.cact" needle verify models/
check "a.cact b.cact models out" needle run -n 5 -t 2 --numerics f32 ""
check "a.cact b.cact models out" needle bench a.cact ""
check "models out" needle dequant a.cact ""
check "models out" needle bench a.cact --official ""
check "a.cact b.cact models notes.txt out tools.json" needle run a.cact --tools ""
check "tools.json" needle run --tools to
check "a.cact b.cact models notes.txt out tools.json" needle eval a.cact ""
check "notes.txt" needle run -f n

echo "$cases cases, $failures failed"
[[ $failures -eq 0 ]]
