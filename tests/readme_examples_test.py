#!/usr/bin/env python3
"""Runs the shell examples of README.md (or another Markdown file) as printed; checks their output.

Usage: readme_examples_test.py NEEDLE_BINARY [FILE.md...]   (default: the repository's README.md)

Convention (README.md, "Testing the documentation"):
- Only ```sh blocks are read. In them, a line starting with "$ " is a command that is run; other
  lines before the first "$ " (set-up scripts such as `bash scripts/test.sh`) are not run.
- The lines after a command, up to the next "$ " line or the end of the block, are its output as
  shown. Each shown line must appear in the command's stdout, in the order shown (other lines may
  come between them). When comparing, runs of white space count as one space; "..." matches any
  text (a line that is only "..." is skipped); a number with a decimal point (a timing, a
  throughput, a probability) matches any number with a decimal point. Everything else, integers
  included, must be equal.
- A command must exit 0, unless the next command is `echo $?`: then its shown output is the exit
  code the previous command must give.
- Commands run with bash, one after the other, in one fresh temporary folder holding symbolic
  links to the repository's examples/, tests/ and scripts/ and, as build/, to the folder of
  NEEDLE_BINARY; `needle` on PATH is NEEDLE_BINARY. Files a command writes stay for the next ones.
Exit 0 when every example passes, 1 otherwise (each failure is described on stderr).
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

DECIMAL = r"-?[0-9]+\.[0-9]+"


def extract_examples(readme_text):
    """Returns [(line number, command, [shown output lines])] from the ```sh blocks."""
    examples = []
    in_sh = False
    current = None
    for number, line in enumerate(readme_text.splitlines(), start=1):
        stripped = line.strip()
        if not in_sh:
            in_sh = stripped == "```sh"
            continue
        if stripped.startswith("```"):
            in_sh = False
            current = None
            continue
        if line.startswith("$ "):
            current = (number, line[2:], [])
            examples.append(current)
        elif current is not None:
            current[2].append(line)
    return examples


def line_pattern(shown):
    """A regular expression for one shown output line (see the module docstring)."""
    parts = []
    for piece in re.split(r"(\.\.\.|" + DECIMAL + r"|\s+)", shown.strip()):
        if not piece:
            continue
        if piece == "...":
            parts.append(".*")
        elif piece.isspace():
            parts.append(" ")
        elif re.fullmatch(DECIMAL, piece):
            parts.append(DECIMAL)
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts))


def check_output(shown_lines, stdout):
    """Returns the first shown line not found (in order) in stdout, or None."""
    actual = [" ".join(line.split()) for line in stdout.splitlines()]
    position = 0
    for shown in shown_lines:
        if shown.strip() in ("", "..."):
            continue
        pattern = line_pattern(shown)
        while position < len(actual) and not pattern.fullmatch(actual[position]):
            position += 1
        if position == len(actual):
            return shown
        position += 1
    return None


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    needle = os.path.abspath(sys.argv[1])
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sys.argv[2:] or [os.path.join(repo, "README.md")]
    return 1 if sum(run_file(needle, repo, path) for path in files) else 0


def run_file(needle, repo, readme):
    """Runs the examples of one Markdown file; returns the number of failures."""
    label = os.path.basename(readme)
    with open(readme, encoding="utf-8") as f:
        examples = extract_examples(f.read())
    if not examples:
        print(f"no examples found in {readme}", file=sys.stderr)
        return 1

    failures = 0
    with tempfile.TemporaryDirectory(prefix="needle-readme-") as work:
        bin_dir = os.path.join(work, ".bin")
        os.mkdir(bin_dir)
        os.symlink(needle, os.path.join(bin_dir, "needle"))
        for name in ("examples", "tests", "scripts"):
            os.symlink(os.path.join(repo, name), os.path.join(work, name))
        os.symlink(os.path.dirname(needle), os.path.join(work, "build"))
        env = dict(os.environ, PATH=bin_dir + os.pathsep + os.environ.get("PATH", ""))
        env.pop("NEEDLE_LOG_LEVEL", None)
        bash = shutil.which("bash") or "/bin/bash"

        previous = None  # (line number, command, exit code) of the last command run
        for number, command, shown in examples:
            if command.strip() == "echo $?":
                expected = shown[0].strip() if shown else "0"
                if previous is None or str(previous[2]) != expected:
                    got = "no command" if previous is None else previous[2]
                    print(f"{label}:{number}: exit code {got}, shown {expected}", file=sys.stderr)
                    failures += 1
                previous = None
                continue
            if previous is not None and previous[2] != 0:
                print(f"{label}:{previous[0]}: `{previous[1]}` exited {previous[2]}",
                      file=sys.stderr)
                failures += 1
            start = time.monotonic()
            result = subprocess.run([bash, "-o", "pipefail", "-c", command], cwd=work, env=env,
                                    capture_output=True, text=True, errors="replace")
            seconds = time.monotonic() - start
            print(f"{label}:{number}: {seconds:6.2f} s  exit {result.returncode}  {command}")
            missing = check_output(shown, result.stdout)
            if missing is not None:
                print(f"{label}:{number}: `{command}` did not print (in order):\n  {missing}\n"
                      f"stdout was:\n{result.stdout}stderr was:\n{result.stderr}",
                      file=sys.stderr)
                failures += 1
            elif result.returncode != 0 and result.stderr:
                print(result.stderr, file=sys.stderr, end="")
            previous = (number, command, result.returncode)
        if previous is not None and previous[2] != 0:
            print(f"{label}:{previous[0]}: `{previous[1]}` exited {previous[2]}",
                  file=sys.stderr)
            failures += 1

    print(f"{label}: {len(examples)} commands, {failures} failure(s)")
    return failures


if __name__ == "__main__":
    sys.exit(main())
