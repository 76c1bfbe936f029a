"""Held-out score of a model: `needle eval --json` on a {tools, query, expected} JSONL file, with
the accuracy overall and on the lines whose expected calls carry a free string argument (a
string that is not a schema enum; in the test split every such value is from the test pools, so
never seen in training), on the lines with only integer / enum arguments, and on the no-call
lines.

  python3 -m needle_torch.score --needle build/needle --model M.cact --data heldout.jsonl \\
      [--limit N] [--json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def has_free_string(example):
    tools = {t["name"]: t for t in example["tools"]}
    for call in example["expected"]:
        properties = tools.get(call["name"], {}).get("parameters", {}).get("properties", {})
        for key, value in call["arguments"].items():
            if isinstance(value, str) and "enum" not in properties.get(key, {}):
                return True
    return False


def score(needle, model, examples, threads=1):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "data.jsonl")
        with open(path, "w", encoding="utf-8") as handle:
            for e in examples:
                handle.write(json.dumps(e, ensure_ascii=False) + "\n")
        result = subprocess.run([needle, "eval", model, path, "--json", "-t", str(threads)],
                                capture_output=True, text=True)
    if result.returncode not in (0, 1):
        raise SystemExit(f"needle eval: exit {result.returncode}: {result.stderr.strip()}")
    report = json.loads(result.stdout)
    failed = {f["line"] for f in report["failures"]}
    groups = {"all": [], "string": [], "other_calls": [], "no_call": []}
    for line, e in enumerate(examples, 1):
        exact = line not in failed
        groups["all"].append(exact)
        if not e["expected"]:
            groups["no_call"].append(exact)
        elif has_free_string(e):
            groups["string"].append(exact)
        else:
            groups["other_calls"].append(exact)
    summary = {k: {"lines": len(v), "exact": sum(v),
                   "accuracy": round(sum(v) / len(v), 4) if v else None}
               for k, v in groups.items()}
    return summary, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--needle", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--limit", type=int, default=0, help="only the first N lines")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--failures", type=int, default=0, help="print that many failures")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with open(args.data, encoding="utf-8") as handle:
        examples = [json.loads(l) for l in handle if l.strip()]
    if args.limit:
        examples = examples[:args.limit]
    summary, report = score(args.needle, args.model, examples, args.threads)
    if args.json:
        print(json.dumps(summary))
    else:
        for key, value in summary.items():
            accuracy = "-" if value["accuracy"] is None else f"{100 * value['accuracy']:.1f}%"
            print(f"{key:12s} {value['exact']:4d}/{value['lines']:<4d} {accuracy}")
    for failure in report["failures"][:args.failures]:
        print(f"  line {failure['line']}: {failure['query']!r} expected "
              f"{json.dumps(failure['expected'])} got {json.dumps(failure['got'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
