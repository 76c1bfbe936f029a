# Reads one `needle [SUBCOMMAND] --help` text (CLI11's layout) and prints it as tab-separated
# records, for scripts/gen-man.sh and scripts/gen-completion.sh:
#   about    <first line: what the command does>
#   usage    <the usage line without "Usage: ">
#   section  <Positionals | Options | Subcommands>
#   item     <head: names, type, Excludes/Needs>  <description>
#   text     <any other line, e.g. the exit codes>
# CLI11 prints an item as "  " + head padded to column 30, then the description; a head of 28 or
# more characters gets a line of its own and the description follows, indented by 30 spaces.

function flush() {
  if (pending == "") return
  if (cont != "") {
    head = pending
    desc = cont
  } else {
    head = substr(pending, 1, 30)
    desc = substr(pending, 31)
  }
  sub(/^ +/, "", head)
  sub(/ +$/, "", head)
  sub(/^ +/, "", desc)
  print "item\t" head "\t" desc
  pending = ""
  cont = ""
}

NR == 1 { print "about\t" $0; next }
/^Usage: / { flush(); sub(/^Usage: /, ""); print "usage\t" $0; next }
/^[A-Z][a-z]+:$/ { flush(); section = substr($0, 1, length($0) - 1); print "section\t" section; next }
/^$/ { flush(); section = ""; next }
section != "" && /^                              / {
  line = $0
  sub(/^ +/, "", line)
  cont = (cont == "") ? line : cont " " line
  next
}
section != "" && /^  [^ ]/ { flush(); pending = $0; next }
{ flush(); print "text\t" $0 }
END { flush() }
