# The shared front of scripts/gen-man.sh and scripts/gen-completion.sh (sourced, not run): checks
# the arguments OUT NEEDLE_COMMAND..., reads the top-level --help through cli-help.awk and lists
# the subcommands it names. Set `tool` (the message prefix) before sourcing.
# Sets: out, needle (the command array: the binary, possibly after an emulator), top (the
# top-level records), subcommands (one per line). Defines sub_records SUB (a subcommand's records).
if [ $# -lt 2 ]; then
  echo "usage: $tool.sh OUT NEEDLE_COMMAND..." >&2
  exit 2
fi
out="$1"
shift
needle=("$@")
cli_help_awk="$(dirname "${BASH_SOURCE[0]}")/cli-help.awk"
top="$("${needle[@]}" --help | awk -f "$cli_help_awk")"
subcommands="$(printf '%s\n' "$top" | awk -F'\t' '
  $1 == "section" { in_sub = ($2 == "Subcommands") }
  $1 == "item" && in_sub { split($2, words, " "); print words[1] }')"
if [ -z "$subcommands" ]; then
  echo "$tool: no subcommands in '${needle[*]} --help'" >&2
  exit 1
fi
sub_records() { "${needle[@]}" "$1" --help | awk -f "$cli_help_awk"; }
