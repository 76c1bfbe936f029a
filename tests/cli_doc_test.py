#!/usr/bin/env python3
"""Checks (or rewrites) the help blocks of docs/CLI.md against the binary's --help output.

Usage: cli_doc_test.py NEEDLE_BINARY [docs/CLI.md]           check: exit 1 on any difference
       cli_doc_test.py --write NEEDLE_BINARY [docs/CLI.md]   rewrite the blocks in place
(scripts/gen-cli-doc.sh runs the second form.)

A help block is a marker line `<!-- help: needle [SUBCOMMAND] --help -->` followed by a fenced
```text block holding exactly what that command prints on stdout. The check also fails when a
subcommand listed by `needle --help` has no block, so a new subcommand cannot go undocumented.
"""

import difflib
import os
import re
import subprocess
import sys

MARKER = re.compile(r"^<!-- help: needle( [a-z]+)? --help -->$")


def help_text(needle, subcommand):
    args = [needle] + ([subcommand] if subcommand else []) + ["--help"]
    result = subprocess.run(args, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {result.returncode}: {result.stderr}")
    return result.stdout.rstrip("\n").split("\n")


def subcommands(needle):
    names = []
    in_list = False
    for line in help_text(needle, None):
        if line.startswith("Subcommands:"):
            in_list = True
        elif in_list and line.startswith("  ") and line.split():
            names.append(line.split()[0])
        elif in_list and not line.strip():
            in_list = False
    return names


def main():
    args = sys.argv[1:]
    write = bool(args) and args[0] == "--write"
    if write:
        args = args[1:]
    if len(args) not in (1, 2):
        print(__doc__, file=sys.stderr)
        return 2
    needle = os.path.abspath(args[0])
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    doc_path = args[1] if len(args) == 2 else os.path.join(repo, "docs", "CLI.md")
    with open(doc_path, encoding="utf-8") as f:
        lines = f.read().split("\n")

    output = []
    documented = []
    problems = []
    i = 0
    while i < len(lines):
        line = lines[i]
        output.append(line)
        match = MARKER.match(line)
        i += 1
        if not match:
            continue
        subcommand = match.group(1).strip() if match.group(1) else None
        documented.append(subcommand)
        if i >= len(lines) or lines[i] != "```text":
            problems.append(f"{doc_path}:{i}: `{line}` is not followed by a ```text block")
            continue
        end = i + 1
        while end < len(lines) and lines[end] != "```":
            end += 1
        shown = lines[i + 1:end]
        expected = help_text(needle, subcommand)
        if shown != expected:
            name = "needle " + (subcommand + " " if subcommand else "") + "--help"
            diff = "\n".join(difflib.unified_diff(shown, expected, f"{doc_path} ({name})",
                                                  f"{name} output", lineterm=""))
            problems.append(f"{doc_path}:{i}: the block differs from `{name}`:\n{diff}")
        output.append("```text")
        output.extend(expected)
        output.append("```")
        i = end + 1

    for name in [None] + subcommands(needle):
        if name not in documented:
            label = "needle " + (name + " " if name else "") + "--help"
            problems.append(f"{doc_path}: no help block for `{label}` "
                            f"(add `<!-- help: {label} -->` and a ```text block)")

    if write:
        with open(doc_path, "w", encoding="utf-8") as f:
            f.write("\n".join(output))
        missing = [p for p in problems if "no help block" in p or "not followed" in p]
        for problem in missing:
            print(problem, file=sys.stderr)
        print(f"{doc_path}: {len(documented)} help blocks written")
        return 1 if missing else 0

    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("regenerate with: bash scripts/gen-cli-doc.sh [build/needle]", file=sys.stderr)
        return 1
    print(f"{doc_path}: {len(documented)} help blocks equal to the binary's --help")
    return 0


if __name__ == "__main__":
    sys.exit(main())
