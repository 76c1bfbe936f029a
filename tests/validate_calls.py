#!/usr/bin/env python3
"""Validates generated tool calls against their tools' JSON schemas with an independent validator
(Debian's python3-jsonschema, Draft 7; draft-4 style boolean exclusiveMinimum/Maximum are rewritten
to their numeric form first). Input: TOOLS.json and CALLS.txt (one generated call array per line).
A line that is not JSON counts as malformed (the engine's `,}` quirk, a failed call, not an emitted
one). Prints one JSON summary; exit 1 when an emitted call fails its schema, 2 on bad input.
  validate_calls.py TOOLS.json CALLS.txt [--expect-invalid]
--expect-invalid: exit 0 only if some call fails (proves the validator catches what it checks)."""
import json
import sys

import jsonschema


def draft4_to_draft7(schema):
    if isinstance(schema, dict):
        out = {k: draft4_to_draft7(v) for k, v in schema.items()}
        for bound, excl in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
            if out.get(excl) is True and bound in out:
                out[excl] = out.pop(bound)
            elif out.get(excl) is False:
                del out[excl]
        return out
    if isinstance(schema, list):
        return [draft4_to_draft7(v) for v in schema]
    return schema


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    expect_invalid = "--expect-invalid" in sys.argv
    if len(args) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    tools = {t["name"]: t for t in json.load(open(args[0]))}
    validators = {}
    for name, t in tools.items():
        schema = draft4_to_draft7(t.get("parameters", {"type": "object"}))
        schema.setdefault("additionalProperties", False)
        validators[name] = jsonschema.Draft7Validator(schema)
    counts = {"calls": 0, "valid": 0, "invalid": 0, "malformed": 0}
    failures = []
    for line in open(args[1], encoding="utf-8"):
        line = line.rstrip("\n")
        if not line:
            continue
        try:
            calls = json.loads(line)
        except json.JSONDecodeError:
            counts["malformed"] += 1
            continue
        for call in calls:
            counts["calls"] += 1
            if set(call) != {"name", "arguments"} or call["name"] not in tools:
                counts["invalid"] += 1
                failures.append({"call": call, "error": "not a declared tool call"})
                continue
            errors = [e.message for e in validators[call["name"]].iter_errors(call["arguments"])]
            if errors:
                counts["invalid"] += 1
                failures.append({"call": call, "errors": errors})
            else:
                counts["valid"] += 1
    counts["first_failures"] = failures[:5]
    print(json.dumps(counts))
    if expect_invalid:
        return 0 if counts["invalid"] > 0 else 1
    return 1 if counts["invalid"] > 0 else 0


if __name__ == "__main__":
    sys.exit(main())
